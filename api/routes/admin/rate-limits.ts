import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { GatewayError } from '../../../core/errors.ts';
import { AUTHENTICATED_ERRORS, BODY_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { adminTokenSecurity } from '../../openapi/security.ts';
import { normalizedLimits, type RateLimitSettings } from '../../services/rate-limits/limit-settings.ts';
import { atMostCharacters } from '../../../core/characters.ts';

// PUT /admin/accounts/{id}/rate-limits and PUT /admin/keys/{id}/rate-limits: an operator's
// overrides of the per-minute limits (api/services/rate-limits/limit-settings.ts, shared with
// the console). Other API processes pick a change up within a few seconds (they re-read
// accounts every 5 s and keys every second).

const PER_MINUTE = 'must be a whole number from 1 to 1000000000, or null to clear the override';
const perMinute = z.number({ error: PER_MINUTE }).int(PER_MINUTE).positive(PER_MINUTE).max(1_000_000_000, PER_MINUTE).nullable().optional();

export const rateLimitsBody = z.strictObject({ requests_per_minute: perMinute, tokens_per_minute: perMinute });

export const rateLimitsView = z.object({
  requests_per_minute: z.number().int().nullable(),
  tokens_per_minute: z.number().int().nullable(),
});

const idParams = z.object({ id: atMostCharacters(z.string().min(1), 100, 'is longer than 100 characters') });

export interface RateLimitRouteOptions {
  settings: RateLimitSettings;
}

export const adminRateLimitRoutes: FastifyPluginAsyncZod<RateLimitRouteOptions> = async (app, { settings }) => {
  app.addHook('onRequest', app.requireAdmin);

  const documented = (operationId: string, summary: string) => ({
    tags: ['admin'],
    operationId,
    summary,
    description:
      'Replaces both overrides: a field that is null or left out is cleared (send both to change one and keep the other). A key’s own limit wins over its account’s, which wins over the configured default.',
    security: adminTokenSecurity,
    params: idParams,
    body: rateLimitsBody,
    response: { 200: rateLimitsView, ...errorResponses(...BODY_ERRORS, 404, ...AUTHENTICATED_ERRORS) },
  });

  app.put('/accounts/:id/rate-limits', { schema: documented('setAccountRateLimits', 'Set an account’s per-minute limits') }, async (request) => {
    const limits = normalizedLimits(request.body);
    if (!(await settings.setForAccount(request.params.id, limits))) throw new GatewayError('resource_not_found', `No account with id '${request.params.id}'.`);
    return limits;
  });

  const keySchema = documented('setKeyRateLimits', 'Set a key’s per-minute limits');
  const keyRoute = { ...keySchema, description: `${keySchema.description} A revoked key is a 409.`, response: { ...keySchema.response, ...errorResponses(409) } };
  app.put('/keys/:id/rate-limits', { schema: keyRoute }, async (request) => {
    const limits = normalizedLimits(request.body);
    const outcome = await settings.setForKey(request.params.id, limits);
    if (outcome === 'missing') throw new GatewayError('resource_not_found', `No key with id '${request.params.id}'.`);
    if (outcome === 'revoked') throw new GatewayError('conflict', `The key '${request.params.id}' is revoked: it makes no calls, and its limits were not changed.`);
    if (outcome === 'revoked-meanwhile') throw new GatewayError('conflict', `The key '${request.params.id}' was revoked while its limits changed: it makes no calls, whatever its limits say.`);
    return limits;
  });
};
