import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

// One log line per request, when it ends, instead of Fastify's two (one on arrival, one on
// completion): at the chat proxy's request rates the second line cost about as much as the
// rest of the gateway's own work. The line carries what following a request needs: its id
// (also sent back as x-request-id and put in a video task's workflow memo), the route, the
// status, the time taken and the key that called.

async function requestLogPlugin(app: FastifyInstance): Promise<void> {
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      {
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
