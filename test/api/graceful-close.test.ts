import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { gracefulClose } from '../../api/plugins/graceful-close.ts';
import { CallsInFlight } from '../../api/services/openai-proxy/calls-in-flight.ts';
import { ClientDisconnect } from '../../api/services/openai-proxy/client-disconnect.ts';
import { asResponse, FakeCallerResponse } from '../helpers/caller-response.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// A call its caller left (an image the provider is making) has no connection for the server's
// close to wait on, yet it must end before app.ts's onClose hooks settle the spend leases, or an
// image back within the grace would go unbilled. The plugin's own close waits for it.

/** An app with the plugin alone, and a call in it whose caller left. */
async function appWithAbandonedCall(graceMs: number) {
  const calls = new CallsInFlight();
  const app = Fastify();
  await app.register(gracefulClose, { calls, graceMs });
  await app.ready();
  const call = new ClientDisconnect(asResponse(new FakeCallerResponse()));
  calls.addAbandoned(call);
  let closed = false;
  const closing = app.close().then(() => (closed = true));
  return { calls, call, closing, isClosed: () => closed };
}

describe('the close and the calls their callers left', () => {
  it('waits for an abandoned call that ends within the grace', async () => {
    const { calls, call, closing, isClosed } = await appWithAbandonedCall(60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(isClosed(), false, 'the close waits though no connection is open');
    assert.equal(call.aborted, false);
    calls.deleteAbandoned(call);
    await closing;
  });

  it('ends an abandoned call when the grace ends, and finishes once it let go', async () => {
    const { calls, call, closing, isClosed } = await appWithAbandonedCall(30);
    await waitUntil(() => call.aborted, 2_000);
    assert.match(call.abortReason.message, /restarting.*nothing was charged/);
    assert.equal(isClosed(), false, 'the interrupted call is still letting go');
    calls.deleteAbandoned(call);
    await closing;
  });

  it('stops waiting at the force deadline for a call that never lets go', { timeout: 10_000 }, async () => {
    const { closing } = await appWithAbandonedCall(20);
    const started = Date.now();
    // A real abandoned call keeps the process up with its upstream socket; the plugin's timers
    // do not (unref'd, so an idle close never holds the process).
    const upstreamSocket = setTimeout(() => {}, 5_000);
    await closing;
    clearTimeout(upstreamSocket);
    // The grace, then the 2 s after it that bound every close.
    assert.ok(Date.now() - started >= 1_900, `closed after ${Date.now() - started} ms`);
  });
});
