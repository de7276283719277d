import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isWellFormedApiKey } from '../../core/api-keys.ts';
import { GatewayError } from '../../core/errors.ts';
import type { ApiKeyStore } from '../../store/api-keys.ts';
import type { RateLimitOverrides } from '../services/rate-limits/rate-limiter.ts';

export interface Principal {
  accountId: string;
  keyId: string;
  /** Model ids the key may use; null means all. */
  models: string[] | null;
  /** The key's own rate limits, over its account's and the defaults. */
  rateLimits?: RateLimitOverrides | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    /** onRequest hook for routes that need an API key (every /v1 route). */
    requireApiKey(request: FastifyRequest): Promise<void>;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

function missingKeyError(message: string): GatewayError {
  return new GatewayError('invalid_api_key', message, undefined, { 'www-authenticate': 'Bearer' });
}

async function apiKeyAuthPlugin(app: FastifyInstance, options: { apiKeys: ApiKeyStore }): Promise<void> {
  app.decorateRequest('principal', null);

  app.decorate('requireApiKey', async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (!header) throw missingKeyError('Missing API key: send it as "Authorization: Bearer <key>".');
    const token = BEARER.exec(header)?.[1];
    if (!token) throw missingKeyError('Malformed Authorization header: expected "Bearer <key>".');
    // The checksum lets typos and foreign tokens be refused without touching the database.
    if (!isWellFormedApiKey(token)) throw missingKeyError('Invalid API key.');
    const key = await options.apiKeys.findActiveByPlaintext(token);
    if (!key) throw missingKeyError('Invalid or revoked API key.');
    options.apiKeys.noteUsed(key._id);
    request.principal = { accountId: key.account_id, keyId: key._id, models: key.models, rateLimits: key.rate_limits ?? null };
  });
}

export const apiKeyAuth = fp(apiKeyAuthPlugin, { name: 'api-key-auth' });

/** The principal of an authenticated request; routes behind requireApiKey always have one. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new GatewayError('invalid_api_key', 'Missing API key.');
  return request.principal;
}
