import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../../core/errors.ts';
import { CallsInFlight } from '../../../api/services/openai-proxy/calls-in-flight.ts';
import { CarriedCall } from '../../../api/services/openai-proxy/carried-call.ts';
import { ClientDisconnect } from '../../../api/services/openai-proxy/client-disconnect.ts';
import { asResponse, FakeCallerResponse } from '../../helpers/caller-response.ts';
import { waitUntil } from '../../helpers/wait-until.ts';

// An image call runs to its end once its request went out, whoever leaves: when the caller's
// leaving still cancels it, when the gateway ends it anyway, and how a close waits for it.

/** A caller and its carried call; `sent`: the request went out to the provider. */
function carriedOf(calls: CallsInFlight, sent = false) {
  const response = new FakeCallerResponse();
  const caller = new ClientDisconnect(asResponse(response), calls);
  const carried = new CarriedCall(caller, calls);
  if (sent) carried.signal.markSent();
  return { response, caller, carried };
}

describe('a call carried on once its request went out', () => {
  it('is cancelled by a caller who leaves before its request went out', () => {
    const calls = new CallsInFlight();
    const { response, carried } = carriedOf(calls);
    response.emit('close');
    assert.equal(carried.signal.aborted, true);
    assert.equal(carried.abandoned, false);
  });

  it('runs on when the caller leaves after its request went out, through a close until the grace ends', async () => {
    const calls = new CallsInFlight();
    const { response, caller, carried } = carriedOf(calls, true);
    response.emit('close');
    assert.equal(caller.callerGone, true);
    assert.equal(carried.signal.aborted, false);
    assert.equal(carried.abandoned, true);
    // The provider bills its images whether or not anyone waits: it has the grace, as a call
    // still answered does, and the close waits for it.
    let ended = false;
    const waited = calls.abandonedEnded().then(() => (ended = true));
    // A grace well past the 10 ms looked at: 40 ms was once outrun on a loaded machine.
    calls.interruptAfter(500);
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(carried.signal.aborted, false, 'not before the grace is over');
    assert.equal(ended, false);
    await waitUntil(() => carried.signal.aborted, 2_000);
    assert.match(carried.signal.abortReason.message, /restarting.*nothing was charged/);
    assert.equal(ended, false, 'the close waits until the call let go');
    carried.done();
    await waited;
    calls.stop();
  });

  it('lets the close go on once an abandoned call ended within the grace', async () => {
    const calls = new CallsInFlight();
    const { response, carried } = carriedOf(calls, true);
    response.emit('close');
    calls.interruptAfter(60_000);
    const waited = calls.abandonedEnded();
    carried.done();
    await waited;
    calls.stop();
    assert.equal(carried.signal.aborted, false);
  });

  it('is interrupted with its caller when the grace ends, as is a call that starts after it', async () => {
    const calls = new CallsInFlight();
    const { response, carried } = carriedOf(calls, true);
    calls.interruptAfter(1);
    await waitUntil(() => carried.signal.aborted, 2_000);
    assert.equal(carried.abandoned, false, 'a live call is interrupted as its caller is');
    const late = carriedOf(calls, true);
    assert.equal(late.carried.signal.aborted, true, 'a call that starts after the grace is interrupted as it starts');
    response.emit('close');
    calls.stop();
  });

  it('is ended by the gateway even after its request went out, as its caller is', () => {
    const calls = new CallsInFlight();
    const { caller, carried } = carriedOf(calls, true);
    const interruption = new GatewayError('service_unavailable', 'restarting');
    caller.interrupt(interruption);
    assert.equal(carried.signal.aborted, true);
    assert.equal(carried.signal.interruption, interruption);
  });

  it('lets go of the caller and of the close once done', () => {
    const calls = new CallsInFlight();
    const { response, caller, carried } = carriedOf(calls, true);
    response.emit('close');
    carried.done();
    calls.interruptAfter(60_000);
    calls.stop();
    assert.equal(carried.signal.aborted, false, 'a finished call is not interrupted');
    assert.equal(caller.listenerCount('abort'), 0);
  });

  it('follows a caller who had left before it began', () => {
    const calls = new CallsInFlight();
    const response = new FakeCallerResponse();
    const caller = new ClientDisconnect(asResponse(response), calls);
    response.emit('close');
    assert.equal(new CarriedCall(caller, calls).signal.aborted, true);
  });
});
