import type { FastifyInstance } from 'fastify';

// Node answers `Expect: 100-continue` with 100 Continue before any handler runs, so a client
// without a key (or over its rate limit) was invited to upload its body, up to 20 MB for chat,
// only to get its 401 or 429 afterwards. Such requests now reach Fastify like any other, and 100
// Continue goes out once the request has passed its onRequest hooks (key, rate limit, Host),
// just before its body is read. A refused request's client never sends its body.

export function continueAfterChecks(app: FastifyInstance): void {
  // Handled this way, Node emits no 'request' for it and sends nothing itself: hand it on.
  app.server.on('checkContinue', (request, response) => app.server.emit('request', request, response));
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (request.headers.expect?.toLowerCase() === '100-continue' && !reply.raw.headersSent) reply.raw.writeContinue();
    done(null, payload);
  });
}
