import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { limitHeaders, type LimitStatus } from '../services/rate-limits/limit-answers.ts';
import type { RateLimiter } from '../services/rate-limits/rate-limiter.ts';
import { principalOf } from './api-key-auth.ts';

// The onRequest hook that counts every /v1 request against its key's per-minute limit (after
// authentication, so the key is known). The x-ratelimit-*-requests headers go on every answer,
// successful or not, the way OpenAI clients read them; over the limit it is a 429 with
// Retry-After (the limiter builds that error). A callback hook: the limiter usually answers
// synchronously, and then no promise is made at all.
export function limitRequests(limiter: RateLimiter) {
  return function requestLimitHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    let status: LimitStatus | Promise<LimitStatus>;
    try {
      status = limiter.admitRequest(principalOf(request));
    } catch (error) {
      return done(error as Error);
    }
    if (!(status instanceof Promise)) {
      reply.headers(limitHeaders('requests', status));
      return done();
    }
    status.then((admitted) => {
      reply.headers(limitHeaders('requests', admitted));
      done();
    }, done);
  };
}
