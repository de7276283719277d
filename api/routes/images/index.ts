import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { principalOf } from '../../plugins/api-key-auth.ts';
import { abortOnDisconnect } from '../../services/openai-proxy/client-disconnect.ts';
import type { ImageProxy } from '../../services/openai-proxy/image-proxy.ts';
import { imageGenerationBody, imageGenerationResponse } from './schemas.ts';

export interface ImageRouteOptions {
  images: ImageProxy;
}

export const imageRoutes: FastifyPluginAsyncZod<ImageRouteOptions> = async (app, options) => {
  app.post('/images/generations', { schema: { body: imageGenerationBody, response: { 200: imageGenerationResponse } } }, async (request, reply) => {
    const context = { signal: abortOnDisconnect(reply.raw), log: request.log };
    try {
      const json = await options.images.generate(principalOf(request), request.body, context);
      // The upstream's text as is: b64 images are large, and re-serializing them buys nothing.
      return reply.type('application/json; charset=utf-8').send(json as unknown as z.infer<typeof imageGenerationResponse>);
    } catch (error) {
      if (context.signal.aborted) return reply.hijack();
      throw error;
    }
  });
};
