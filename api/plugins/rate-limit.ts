import type { FastifyReply, FastifyRequest } from 'fastify';
import { limitHeaders, type RateLimiter } from '../services/rate-limits/rate-limiter.ts';
import { principalOf } from './api-key-auth.ts';

// The onRequest hook that counts every /v1 request against its key's per-minute limit (after
// authentication, so the key is known). The x-ratelimit-*-requests headers go on every answer,
// successful or not, the way OpenAI clients read them; over the limit it is a 429 with
// Retry-After (the limiter builds that error).
export function limitRequests(limiter: RateLimiter) {
  return async function requestLimitHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const status = await limiter.admitRequest(principalOf(request));
    reply.headers(limitHeaders('requests', status));
  };
}
