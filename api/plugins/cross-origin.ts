import type { FastifyInstance, FastifyReply } from 'fastify';

// Browser apps call /v1 with a bearer key, as they call OpenAI's API, which answers CORS: any
// origin, no cookies (a key in a header is not sent by the browser on its own, so no page can
// borrow a visitor's). /admin and /console (a token, session cookies) take no part.
//
// Written here rather than taken from @fastify/cors: that plugin's per-request hook cost 10 to
// 20 µs a call in a scratch measurement (client and server in one process, 165 µs a call
// without it), on every call whether a browser made it or not. Here a call without an Origin
// header pays one property read, inside the hook that already sets x-request-id.

/** Answer headers a page's script may read: those OpenAI's clients read, and ours. */
const EXPOSED_HEADERS = [
  'x-request-id',
  'idempotent-replayed',
  'retry-after',
  'retry-after-ms',
  'x-should-retry',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
].join(', ');

/** Whether a request to `url` from a page on another origin may read its answer. */
export function isCrossOriginPath(url: string): boolean {
  return url.startsWith('/v1/');
}

/** Lets the calling page read this answer (its status, body and the exposed headers). */
export function allowCrossOrigin(reply: FastifyReply): void {
  reply.header('access-control-allow-origin', '*');
  reply.header('access-control-expose-headers', EXPOSED_HEADERS);
}

// A browser asks before a call with an Authorization header: the methods and request headers
// it names (token characters only, as in Access-Control-Request-Headers) are allowed, for ten
// minutes. Any other OPTIONS is answered as before: 405 with Allow, or 404.
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;

export async function crossOriginPreflight(app: FastifyInstance): Promise<void> {
  app.options('/v1/*', { schema: { hide: true } }, async (request, reply) => {
    const method = request.headers['access-control-request-method'];
    if (request.headers.origin === undefined || typeof method !== 'string') return reply.callNotFound();
    const asked = request.headers['access-control-request-headers'];
    reply.header('access-control-allow-origin', '*');
    reply.header('access-control-allow-methods', 'GET, POST, DELETE');
    if (typeof asked === 'string' && HEADER_LIST.test(asked)) reply.header('access-control-allow-headers', asked);
    reply.header('access-control-max-age', '600');
    // Some browsers wait for a body on a 204 without Content-Length.
    return reply.code(204).header('content-length', '0').send();
  });
}
