import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import { mayUseModel } from '../../../core/model-access.ts';
import { atMostCharacters } from '../../../core/characters.ts';
import { AUTHENTICATED_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { apiKeySecurity } from '../../openapi/security.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';

const modelSchema = z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string() });

export const modelRoutes: FastifyPluginAsyncZod<{ catalog: Catalog }> = async (app, { catalog }) => {
  const listSchema = {
    tags: ['models'],
    operationId: 'listModels',
    summary: 'List the models this key may use',
    security: apiKeySecurity,
    response: { 200: z.object({ object: z.literal('list'), data: z.array(modelSchema) }), ...errorResponses(...AUTHENTICATED_ERRORS) },
  };
  app.get('/models', { schema: listSchema }, async (request) => {
    const principal = principalOf(request);
    const data = catalog
      .all()
      .filter((model) => mayUseModel(principal, model.id))
      .map((model) => ({ id: model.id, object: 'model' as const, created: catalog.data.created, owned_by: model.owned_by }));
    return { object: 'list' as const, data };
  });

  const readSchema = {
    tags: ['models'],
    operationId: 'retrieveModel',
    summary: 'Read one model',
    description: 'A model the key may not use is a 404, as if it did not exist.',
    security: apiKeySecurity,
    params: z.object({ model: atMostCharacters(z.string(), 200, 'is longer than 200 characters').describe('A model id.') }),
    response: { 200: modelSchema, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) },
  };
  app.get('/models/:model', { schema: readSchema }, async (request) => {
    const principal = principalOf(request);
    const model = catalog.find(request.params.model);
    if (!model || !mayUseModel(principal, model.id)) {
      throw new GatewayError('model_not_found', `The model '${request.params.model}' does not exist or this key may not use it.`, 'model');
    }
    return { id: model.id, object: 'model' as const, created: catalog.data.created, owned_by: model.owned_by };
  });
};
