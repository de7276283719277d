import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import fp from 'fastify-plugin';
import { isWellFormedApiKey } from '../../core/api-keys.ts';
import { GatewayError } from '../../core/errors.ts';
import { soleAuthorization } from './authorization-header.ts';
import { UnknownKeyThrottle } from './unknown-key-throttle.ts';
import type { ApiKeyDocument, ApiKeyStore } from '../../store/api-keys.ts';
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
    requireApiKey(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

function missingKeyError(message: string): GatewayError {
  return new GatewayError('invalid_api_key', message, undefined, { 'www-authenticate': 'Bearer' });
}

/** Sets the request's principal from its key; the error to answer with when there is none. */
function authenticate(request: FastifyRequest, key: ApiKeyDocument | null, apiKeys: ApiKeyStore): GatewayError | undefined {
  if (!key) return missingKeyError('Invalid or revoked API key.');
  apiKeys.noteUsed(key._id);
  request.principal = { accountId: key.account_id, keyId: key._id, models: key.models, rateLimits: key.rate_limits ?? null };
  return undefined;
}

async function apiKeyAuthPlugin(app: FastifyInstance, options: { apiKeys: ApiKeyStore; unknownKeys?: UnknownKeyThrottle }): Promise<void> {
  app.decorateRequest('principal', null);
  const unknownKeys = options.unknownKeys ?? new UnknownKeyThrottle();

  // A callback hook: a cached key (nearly every call) is found synchronously, and then the
  // request goes on without a promise being made.
  app.decorate('requireApiKey', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    let header: string | undefined;
    try {
      header = soleAuthorization(request);
    } catch (error) {
      return done(error as Error);
    }
    if (!header) return done(missingKeyError('Missing API key: send it as "Authorization: Bearer <key>".'));
    const token = BEARER.exec(header)?.[1];
    if (!token) return done(missingKeyError('Malformed Authorization header: expected "Bearer <key>".'));
    // The checksum lets typos and foreign tokens be refused without touching the database.
    if (!isWellFormedApiKey(token)) return done(missingKeyError('Invalid API key.'));
    let found: ReturnType<ApiKeyStore['findActiveByPlaintext']> | undefined;
    let throttled: Error | undefined;
    let admitted = false;
    try {
      // From the cache first (nearly every call): the throttle is asked only before a read, so
      // a call with a key in use pays nothing for it.
      const now = Date.now();
      found = options.apiKeys.findActiveByPlaintext(token, now, false);
      if (found === undefined) {
        if (options.apiKeys.mayExist(token)) {
          // A key that exists is no guess: read whatever its caller's address did.
          found = options.apiKeys.findActiveByPlaintext(token, now);
        } else {
          // An address past its reads that found no key gets answers from the cache alone.
          throttled = unknownKeys.admitRead(request.ip);
          if (!throttled) {
            admitted = true;
            found = options.apiKeys.findActiveByPlaintext(token, now);
          }
        }
      }
    } catch (error) {
      if (admitted) unknownKeys.readFailed(request.ip, error);
      return done(error as Error);
    }
    if (throttled || found === undefined) return done(throttled);
    if (found instanceof Promise) {
      // Not admitted: it joined a read of the same key under way, which counted once.
      found.then(
        (key) => {
          if (key && admitted) unknownKeys.keyFound(request.ip);
          done(authenticate(request, key, options.apiKeys));
        },
        (error: Error) => {
          // A store outage says nothing of the key: counted, 30 failed reads turned the 503s of
          // valid keys into 429s "with unknown API keys" (an outage review).
          if (admitted) unknownKeys.readFailed(request.ip, error);
          done(error);
        },
      );
    } else done(authenticate(request, found, options.apiKeys));
  });
}

export const apiKeyAuth = fp(apiKeyAuthPlugin, { name: 'api-key-auth' });

/** The principal of an authenticated request; routes behind requireApiKey always have one. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new GatewayError('invalid_api_key', 'Missing API key.');
  return request.principal;
}
