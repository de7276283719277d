import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { restartRefusal, type CallsInFlight } from '../services/openai-proxy/calls-in-flight.ts';

// How the api closes (SIGTERM, server.ts): the server stops taking connections and waits for
// the requests it is serving, then the onClose hooks settle the spend leases. Three things
// would make that wait longer than an orchestrator gives it before a kill, which would leave
// the leases unsettled:
// - a stream can run for minutes: past `graceMs` the chat and image calls still running are
//   ended (calls-in-flight.ts);
// - server.close() ends only the connections idle at that moment. One whose request was still
//   running stays open after its answer, for the keep-alive timeout (72 s), and the close waits
//   on it: such connections are closed as soon as they go idle;
// - Node never counts a connection idle that was opened but sent no request (a client's spare
//   socket), and once closing it no longer times out their headers; a caller that stopped
//   reading never lets a last write finish. FORCE_AFTER_GRACE_MS after the grace, the
//   connections still open are closed whatever they are doing.
// - an image call whose caller left runs on (carried-call.ts) with no connection for the close
//   to wait on: the onClose hook waits for it, so that images back within the grace are charged
//   before the leases settle (this hook runs before app.ts's, which were added earlier), and
//   for its answer's Idempotency-Key record, before the store closes.
// A request that arrives during the close, on a connection that was already open, is refused
// here with the spec's error body, Retry-After and `connection: close`, so the client's next
// attempt opens a connection (to another process, behind a load balancer). Fastify's own
// `return503OnClosing` answers its own body, without type, code or Retry-After.

export interface GracefulCloseOptions {
  calls: CallsInFlight;
  graceMs: number;
}

/** How often connections that went idle during the close are looked for. */
const IDLE_SWEEP_MS = 50;
/** Time after the grace for interrupted calls to write their last answer. */
const FORCE_AFTER_GRACE_MS = 2_000;

async function gracefulClosePlugin(app: FastifyInstance, options: GracefulCloseOptions): Promise<void> {
  let sweep: NodeJS.Timeout | undefined;
  let force: NodeJS.Timeout | undefined;
  let forced: Promise<void> = Promise.resolve();
  let closing = false;
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    const refusal = restartRefusal('The gateway is restarting and takes no new calls; nothing was charged. Retry shortly.');
    // Not through the error handler, which logs every 5xx as a failure with its stack.
    void reply.code(refusal.status).headers(refusal.headers).header('connection', 'close').send(refusal.toBody());
  });
  app.addHook('preClose', (done) => {
    closing = true;
    options.calls.interruptAfter(options.graceMs);
    sweep = setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_MS);
    let forceDone = (): void => {};
    forced = new Promise((resolve) => (forceDone = resolve));
    force = setTimeout(() => {
      app.server.closeAllConnections();
      forceDone();
    }, options.graceMs + FORCE_AFTER_GRACE_MS);
    // The close they serve may finish first; the process must not stay up for them.
    sweep.unref();
    force.unref();
    done();
  });
  app.addHook('onClose', async () => {
    clearInterval(sweep);
    // The grace's end interrupts abandoned calls; the force deadline bounds the wait even if
    // one never let go.
    await Promise.race([options.calls.abandonedEnded(), forced]);
    // A call that ended so answers in the turns that follow, and its reply's onSend writes the
    // answer to its Idempotency-Key record: the store closes once this close is done.
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.race([options.calls.answerWritesDone(), forced]);
    clearTimeout(force);
    options.calls.stop();
  });
}

export const gracefulClose = fp(gracefulClosePlugin, { name: 'graceful-close' });
