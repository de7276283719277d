import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import type { ApiKeyStore } from '../../../store/api-keys.ts';
import { AUTHENTICATED_ERRORS, BODY_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { adminTokenSecurity } from '../../openapi/security.ts';
import { accountIdParams, keyDetailView, keyModelsBodyFor, keyView, unknownModels } from './schemas.ts';
import { toKeyDetailView, toKeyView } from './views.ts';

// An API key by its id (GET /admin/keys/{id}), what it may use (PUT /admin/keys/{id}/models)
// and its end (DELETE /admin/keys/{id}). A key is created under its account (index.ts).

export interface AdminKeyRouteOptions {
  apiKeys: ApiKeyStore;
  catalog: Catalog;
}

function keyNotFound(id: string): GatewayError {
  return new GatewayError('resource_not_found', `No key with id '${id}'.`);
}

function keyRevoked(id: string): GatewayError {
  return new GatewayError('conflict', `The key '${id}' is revoked: it uses no model, and its models were not changed.`);
}

function keyRevokedMeanwhile(id: string): GatewayError {
  return new GatewayError('conflict', `The key '${id}' was revoked while its models changed: it uses no model, whatever its models say.`);
}

export const adminKeyRoutes: FastifyPluginAsyncZod<AdminKeyRouteOptions> = async (app, { apiKeys, catalog }) => {
  app.addHook('onRequest', app.requireAdmin);
  const documented = (operationId: string, summary: string) => ({ tags: ['admin'], operationId, summary, security: adminTokenSecurity, params: accountIdParams });

  app.get('/keys/:id', { schema: { ...documented('getKey', 'Read an API key: its account, models and limits'), response: { 200: keyDetailView, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) } } }, async (request) => {
    const key = await apiKeys.find(request.params.id);
    if (!key) throw keyNotFound(request.params.id);
    return toKeyDetailView(key);
  });

  app.put(
    '/keys/:id/models',
    {
      schema: {
        ...documented('setKeyModels', 'Change the models an API key may use'),
        description: 'Replaces the list. Every api process refuses a model taken away within about a second, with 403 `model_not_allowed`; the key itself is unchanged. A revoked key is a 409.',
        body: keyModelsBodyFor(catalog),
        response: { 200: keyDetailView, ...errorResponses(...BODY_ERRORS, 404, 409, ...AUTHENTICATED_ERRORS) },
      },
    },
    async (request) => {
      const refusal = unknownModels(catalog, request.body.models);
      if (refusal) throw refusal;
      const existing = await apiKeys.find(request.params.id);
      if (!existing) throw keyNotFound(request.params.id);
      if (existing.revoked_at) throw keyRevoked(request.params.id);
      const key = await apiKeys.setModels(request.params.id, request.body.models);
      if (!key) throw keyNotFound(request.params.id);
      // Revoked while this ran: the models were written, but the key uses none.
      if (key.revoked_at) throw keyRevokedMeanwhile(request.params.id);
      return toKeyDetailView(key);
    },
  );

  app.delete('/keys/:id', { schema: { ...documented('revokeKey', 'Revoke an API key, effective at once'), response: { 200: keyView, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) } } }, async (request) => {
    const key = await apiKeys.revoke(request.params.id);
    if (!key) throw keyNotFound(request.params.id);
    return toKeyView(key);
  });
};
