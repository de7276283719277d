import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Catalog, CatalogModel } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import { findUsableModel, mayUseModel } from '../../../core/model-access.ts';
import { AUTHENTICATED_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { apiKeySecurity } from '../../openapi/security.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';

const modelSchema = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string(),
  // Not in OpenAI's model object (its clients keep unknown fields): without it a caller cannot
  // tell which endpoint takes the model short of trying one.
  kind: z.enum(['chat', 'image', 'video']).describe('What the model makes, so which endpoint takes it: chat completions, image generations or video generations.'),
});

/** A catalog model as GET /v1/models shows it. */
function modelView(model: CatalogModel, created: number) {
  return { id: model.id, object: 'model' as const, created, owned_by: model.owned_by, kind: model.kind };
}

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
      .map((model) => modelView(model, catalog.data.created));
    return { object: 'list' as const, data };
  });

  const readSchema = {
    tags: ['models'],
    operationId: 'retrieveModel',
    summary: 'Read one model',
    description: 'A model the key may not use is a 403 (`model_not_allowed`), as on every endpoint that names a model. An id with slashes (`org/model`) may be sent as is or with the slashes encoded.',
    security: apiKeySecurity,
    params: z.object({ model: z.string().describe('A model id.') }),
    // 400: a path whose percent-encoding is malformed (api/plugins/error-handler.ts).
    response: { 200: modelSchema, ...errorResponses(400, 403, 404, ...AUTHENTICATED_ERRORS) },
  };
  // The spec's order, as on every other endpoint (core/model-access.ts): an unknown id is a 404,
  // a model the key may not use a 403 (spec 5.6). Hiding it as a 404 here hid nothing: a
  // submission naming it answers 403.
  app.get('/models/:model', { schema: readSchema }, async (request) => {
    // `/v1/models/` (a trailing slash): no id at all, rather than an id no model has.
    if (request.params.model === '') throw new GatewayError('model_not_found', 'No model id in the path: GET /v1/models/{model} reads a model, GET /v1/models lists them.', 'model');
    return modelView(findUsableModel(catalog, principalOf(request), request.params.model), catalog.data.created);
  });
};

const MODEL_PATH = '/v1/models/';

/** Fastify's rewriteUrl: an id such as meta-llama/Llama-3-8B reaches /v1/models/:model whole.
 * The Node client encodes its slashes, the Python client sends them as they are, which would
 * otherwise be a path the router does not have. */
export function modelIdsWithSlashes(request: { url?: string }): string {
  const url = request.url ?? '/';
  if (!url.startsWith(MODEL_PATH) || url.indexOf('/', MODEL_PATH.length) === -1) return url;
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  return MODEL_PATH + path.slice(MODEL_PATH.length).replaceAll('/', '%2F') + (query === -1 ? '' : url.slice(query));
}
