import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Collection } from 'mongodb';
import { z } from 'zod';
import { GatewayError } from '../../../core/errors.ts';
import type { ApiKeyStore } from '../../../store/api-keys.ts';
import type { AccountRateLimits, RateLimiter } from '../../services/rate-limits/rate-limiter.ts';

// PUT /admin/accounts/{id}/rate-limits and PUT /admin/keys/{id}/rate-limits: an operator's
// overrides of the per-minute limits. A key's own limit wins over its account's, which wins
// over the configured default; null clears an override. Other API processes pick a change up
// within a few seconds (they re-read accounts every 5 s and keys every second).

const perMinute = z.number().int().positive().max(1_000_000_000).nullable().optional();

export const rateLimitsBody = z.strictObject({ requests_per_minute: perMinute, tokens_per_minute: perMinute });

export const rateLimitsView = z.object({
  requests_per_minute: z.number().int().nullable(),
  tokens_per_minute: z.number().int().nullable(),
});

const idParams = z.object({ id: z.string().min(1) });

export interface RateLimitRouteOptions {
  apiKeys: ApiKeyStore;
  accounts: Collection<AccountRateLimits>;
  limiter: RateLimiter;
}

function normalized(body: z.infer<typeof rateLimitsBody>) {
  return { requests_per_minute: body.requests_per_minute ?? null, tokens_per_minute: body.tokens_per_minute ?? null };
}

export const adminRateLimitRoutes: FastifyPluginAsyncZod<RateLimitRouteOptions> = async (app, { apiKeys, accounts, limiter }) => {
  app.addHook('onRequest', app.requireAdmin);

  app.put('/accounts/:id/rate-limits', { schema: { params: idParams, body: rateLimitsBody, response: { 200: rateLimitsView } } }, async (request) => {
    const limits = normalized(request.body);
    const updated = await accounts.updateOne({ _id: request.params.id }, { $set: { rate_limits: limits } });
    if (updated.matchedCount === 0) throw new GatewayError('resource_not_found', `No account with id '${request.params.id}'.`);
    limiter.forgetAccount(request.params.id);
    return limits;
  });

  app.put('/keys/:id/rate-limits', { schema: { params: idParams, body: rateLimitsBody, response: { 200: rateLimitsView } } }, async (request) => {
    const limits = normalized(request.body);
    const key = await apiKeys.setRateLimits(request.params.id, limits);
    if (!key) throw new GatewayError('resource_not_found', `No key with id '${request.params.id}'.`);
    return limits;
  });
};
