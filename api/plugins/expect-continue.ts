import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

// Node answers `Expect: 100-continue` with 100 Continue before any handler runs, so a client
// without a key (or over its rate limit) was invited to upload its body, up to 20 MB for chat,
// only to get its 401 or 429 afterwards. Such requests now reach Fastify like any other, and 100
// Continue goes out once the request has passed its onRequest hooks (key, rate limit, Host),
// just before its body is read. A refused request's client never sends its body.

/** The requests Node handed over as expecting 100 Continue (it judges the header, and ignores
 * it on HTTP/1.0, where a 100 would read as the final answer). */
const awaitingContinue = new WeakSet<IncomingMessage>();

export function continueAfterChecks(app: FastifyInstance): void {
  // Handled this way, Node emits no 'request' for it and sends nothing itself: hand it on.
  app.server.on('checkContinue', (request, response) => {
    awaitingContinue.add(request);
    app.server.emit('request', request, response);
  });
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (awaitingContinue.has(request.raw) && !reply.raw.headersSent) {
      // A body over the route's limit is refused (413) from its Content-Length alone: not
      // invited either.
      const length = Number(request.headers['content-length']);
      const limit = request.routeOptions.bodyLimit;
      if (!(limit !== undefined && length > limit)) reply.raw.writeContinue();
    }
    done(null, payload);
  });
}
