import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../../core/errors.ts';
import { CallsInFlight } from '../../../api/services/openai-proxy/calls-in-flight.ts';
import { CarriedCall } from '../../../api/services/openai-proxy/carried-call.ts';
import { ClientDisconnect } from '../../../api/services/openai-proxy/client-disconnect.ts';
import { asResponse, FakeCallerResponse } from '../../helpers/caller-response.ts';

// An image call runs to its end once its request went out, whoever leaves: when the caller's
// leaving still cancels it, and when the gateway ends it anyway.

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

  it('runs on when the caller leaves after its request went out, until a close ends it at once', () => {
    const calls = new CallsInFlight();
    const { response, caller, carried } = carriedOf(calls, true);
    response.emit('close');
    assert.equal(caller.callerGone, true);
    assert.equal(carried.signal.aborted, false);
    assert.equal(carried.abandoned, true);
    // Not after the grace: nobody waits for its answer.
    calls.interruptAfter(60_000);
    calls.stop();
    assert.equal(carried.signal.aborted, true);
    assert.match(carried.signal.abortReason.message, /restarting.*its caller had left; nothing was charged/);
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
