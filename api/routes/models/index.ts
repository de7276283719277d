import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import { mayUseModel } from '../../../core/model-access.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';

const modelSchema = z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string() });

export const modelRoutes: FastifyPluginAsyncZod<{ catalog: Catalog }> = async (app, { catalog }) => {
  app.get('/models', { schema: { response: { 200: z.object({ object: z.literal('list'), data: z.array(modelSchema) }) } } }, async (request) => {
    const principal = principalOf(request);
    const data = catalog
      .all()
      .filter((model) => mayUseModel(principal, model.id))
      .map((model) => ({ id: model.id, object: 'model' as const, created: catalog.data.created, owned_by: model.owned_by }));
    return { object: 'list' as const, data };
  });

  app.get('/models/:model', { schema: { params: z.object({ model: z.string() }), response: { 200: modelSchema } } }, async (request) => {
    const principal = principalOf(request);
    const model = catalog.find(request.params.model);
    if (!model || !mayUseModel(principal, model.id)) {
      throw new GatewayError('model_not_found', `The model '${request.params.model}' does not exist or this key may not use it.`, 'model');
    }
    return { id: model.id, object: 'model' as const, created: catalog.data.created, owned_by: model.owned_by };
  });
};
