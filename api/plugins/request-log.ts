import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { TurnBatch } from '../../core/turn-batch.ts';

// One log line per request, when it ends, instead of Fastify's two (one on arrival, one on
// completion): at the chat proxy's request rates the second line cost about as much as the
// rest of the gateway's own work. The line carries what following a request needs: its id
// (also sent back as x-request-id and put in a video task's workflow memo), the route, the
// status, the time taken and the key that called. It is written through the root logger with
// the id as a field, as the request's own logger would write it: that logger is then never
// made for a request that logs nothing else (api/lazy-request-logger.ts).
//
// The lines of the requests that ended in one turn of the event loop are written together at
// its end (core/turn-batch.ts says why): a line's `time` is when it was written, at most that
// turn later than the request's end; `ms` is the request's own time. Closing the app writes
// what is pending; a crash can lose the lines of its last turn, as a SIGKILL can lose the last
// 250 ms of lines (api/log-destination.ts).

interface CompletedRequest {
  reqId: string;
  method: string;
  url: string;
  route: string | undefined;
  status: number;
  ms: number;
  key: string | undefined;
}

async function requestLogPlugin(app: FastifyInstance): Promise<void> {
  const lines = new TurnBatch<CompletedRequest>((line) => app.log.info(line, 'request completed'));
  app.addHook('onResponse', (request, reply, done) => {
    lines.add({
      reqId: request.id,
      method: request.method,
      url: request.url,
      route: request.routeOptions.url,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      key: request.principal?.keyId,
    });
    done();
  });
  app.addHook('onClose', async () => lines.flush());
}

export const requestLog = fp(requestLogPlugin, { name: 'request-log' });
