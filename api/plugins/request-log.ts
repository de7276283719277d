import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

// One log line per request, when it ends, instead of Fastify's two (one on arrival, one on
// completion): at the chat proxy's request rates the second line cost about as much as the
// rest of the gateway's own work. The line carries what following a request needs: its id
// (also sent back as x-request-id and put in a video task's workflow memo), the route, the
// status, the time taken and the key that called. It is written through the root logger with
// the id as a field, as the request's own logger would write it: that logger is then never
// made for a request that logs nothing else (api/lazy-request-logger.ts).

async function requestLogPlugin(app: FastifyInstance): Promise<void> {
  app.addHook('onResponse', (request, reply, done) => {
    app.log.info(
      {
        reqId: request.id,
        method: request.method,
        url: request.url,
        route: request.routeOptions.url,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
        key: request.principal?.keyId,
      },
      'request completed',
    );
    done();
  });
}

export const requestLog = fp(requestLogPlugin, { name: 'request-log' });
