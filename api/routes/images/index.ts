import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { Catalog } from '../../../core/catalog.ts';
import { AUTHENTICATED_ERRORS, BODY_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { apiKeySecurity } from '../../openapi/security.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';
import type { CallsInFlight } from '../../services/openai-proxy/calls-in-flight.ts';
import { ClientDisconnect } from '../../services/openai-proxy/client-disconnect.ts';
import { logCallerLeft } from '../../plugins/request-log.ts';
import type { ImageProxy } from '../../services/openai-proxy/image-proxy.ts';
import { idempotencyHeaders } from '../idempotency-header.ts';
import { resolveModelFirst } from '../model-resolution.ts';
import { imageGenerationBodyFor, imageGenerationResponse } from './schemas.ts';

export interface ImageRouteOptions {
  catalog: Catalog;
  images: ImageProxy;
  calls: CallsInFlight;
}

export const imageRoutes: FastifyPluginAsyncZod<ImageRouteOptions> = async (app, options) => {
  const schema = {
    tags: ['images'],
    operationId: 'createImage',
    summary: 'Generate images (OpenAI-compatible)',
    description: 'Parameters not named here are passed to the upstream as they came (integers beyond 2^53 as written; numbers with a fraction or exponent as the nearest double). Billed per image returned; a failed call is not billed. Once the provider has the request, the call runs to its end and is billed even if the caller leaves (a retry under the same Idempotency-Key then gets its images).',
    security: apiKeySecurity,
    headers: idempotencyHeaders,
    body: imageGenerationBodyFor(options.catalog),
    // 409 and 422: Idempotency-Key (and an upstream's own 409); the upstream's 5xx become 502.
    response: { 200: imageGenerationResponse, ...errorResponses(...BODY_ERRORS, 403, 404, 409, 422, 502, ...AUTHENTICATED_ERRORS) },
  };

  app.post('/images/generations', { schema, config: { verbatimIntegers: true }, preValidation: resolveModelFirst(options.catalog, 'image') }, async (request, reply) => {
    const context = { signal: new ClientDisconnect(reply.raw, options.calls), log: request.log };
    try {
      const json = await options.images.generate(principalOf(request), request.body, context);
      // The upstream's text as is: b64 images are large, and re-serializing them buys nothing.
      // Sent even when the caller has left (the images were made and charged, carried-call.ts):
      // nothing reaches it, but an Idempotency-Key's record keeps the answer for its retry.
      if (context.signal.callerGone) logCallerLeft(request, reply);
      return reply.type('application/json; charset=utf-8').send(json as unknown as z.infer<typeof imageGenerationResponse>);
    } catch (error) {
      if (context.signal.callerGone) {
        logCallerLeft(request, reply);
        return reply.hijack();
      }
      throw error;
    }
  });
};
