import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { CallsInFlight } from '../services/openai-proxy/calls-in-flight.ts';

// How the api closes (SIGTERM, server.ts): the server stops taking connections and waits for
// the requests it is serving, then the onClose hooks settle the spend leases. Two things would
// make that wait longer than an orchestrator gives it before a kill:
// - a stream can run for minutes: past `graceMs` the chat and image calls still running are
//   ended (calls-in-flight.ts);
// - server.close() ends only the connections idle at that moment. One whose request was still
//   running stays open after its answer, for the keep-alive timeout (72 s), and the close waits
//   on it: such connections are closed as soon as they go idle.

export interface GracefulCloseOptions {
  calls: CallsInFlight;
  graceMs: number;
}

/** How often connections that went idle during the close are looked for. */
const IDLE_SWEEP_MS = 50;

async function gracefulClosePlugin(app: FastifyInstance, options: GracefulCloseOptions): Promise<void> {
  let sweep: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    options.calls.interruptAfter(options.graceMs);
    sweep = setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_MS);
    sweep.unref();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(sweep);
    options.calls.stop();
    done();
  });
}

export const gracefulClose = fp(gracefulClosePlugin, { name: 'graceful-close' });
