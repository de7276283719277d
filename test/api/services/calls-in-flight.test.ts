import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../../core/errors.ts';
import { CallsInFlight } from '../../../api/services/openai-proxy/calls-in-flight.ts';
import { ClientDisconnect, untilAborted } from '../../../api/services/openai-proxy/client-disconnect.ts';
import { asResponse, FakeCallerResponse } from '../../helpers/caller-response.ts';
import { waitUntil } from '../../helpers/wait-until.ts';

// A call's ClientDisconnect and the tracker a shutdown interrupts calls through: who is
// tracked, when a call counts as interrupted rather than left, and an upstream request that
// is given up at once rather than when undici gets round to it.

describe('calls in flight and their interruption', () => {
  it('tracks a call until its response closes, and a caller who left counts as gone, not interrupted', () => {
    const calls = new CallsInFlight();
    const response = new FakeCallerResponse();
    const signal = new ClientDisconnect(asResponse(response), calls);
    assert.equal(calls.size, 1);
    response.emit('close');
    assert.equal(calls.size, 0);
    assert.equal(signal.aborted, true);
    assert.equal(signal.callerGone, true);
  });

  it('does not track a call whose caller left before it started (a hook awaited meanwhile)', () => {
    const calls = new CallsInFlight();
    const response = new FakeCallerResponse();
    response.destroyed = true;
    const signal = new ClientDisconnect(asResponse(response), calls);
    assert.equal(calls.size, 0);
    assert.equal(signal.callerGone, true);
  });

  it('interrupts the calls still running after the grace with a 503, and any call that starts later', async () => {
    const calls = new CallsInFlight();
    const finished = new FakeCallerResponse();
    const running = new FakeCallerResponse();
    const endedInTime = new ClientDisconnect(asResponse(finished), calls);
    const stillRunning = new ClientDisconnect(asResponse(running), calls);
    const reasons: Error[] = [];
    stillRunning.on('abort', (reason: Error) => reasons.push(reason));
    finished.writableFinished = true;
    finished.emit('close');

    calls.interruptAfter(30);
    assert.equal(stillRunning.aborted, false, 'nothing happens before the grace is over');
    await waitUntil(() => stillRunning.aborted, 2_000);
    assert.equal(endedInTime.aborted, false);
    assert.equal(stillRunning.callerGone, false);
    assert.ok(stillRunning.interruption instanceof GatewayError);
    assert.equal(stillRunning.interruption.status, 503);
    assert.equal(stillRunning.interruption.headers['retry-after'], '1');
    assert.deepEqual(reasons, [stillRunning.interruption]);
    // The interrupted caller's connection closing afterwards does not make it a caller who left.
    running.emit('close');
    assert.equal(stillRunning.callerGone, false);
    assert.equal(reasons.length, 1);

    const late = new ClientDisconnect(asResponse(new FakeCallerResponse()), calls);
    assert.equal(late.interruption, stillRunning.interruption);
    assert.equal(calls.size, 0);
  });

  it('gives up on an upstream request as soon as the call is aborted, and destroys an answer that comes after all', async () => {
    const response = new FakeCallerResponse();
    const signal = new ClientDisconnect(asResponse(response));
    let answer!: (value: { body: { destroy(): void } }) => void;
    const pending = new Promise<{ body: { destroy(): void } }>((resolve) => (answer = resolve));
    const given = untilAborted(pending, signal);
    const error = new GatewayError('service_unavailable', 'restarting');
    signal.interrupt(error);
    await assert.rejects(given, (thrown) => thrown === error);
    assert.equal(signal.listenerCount('abort'), 0);

    let destroyed = 0;
    answer({ body: { destroy: () => destroyed++ } });
    await waitUntil(() => destroyed === 1, 2_000);

    // Already aborted: refused without waiting at all, and a late answer is destroyed too.
    let destroyedLate = 0;
    await assert.rejects(untilAborted(Promise.resolve({ body: { destroy: () => destroyedLate++ } }), signal), (thrown) => thrown === error);
    await waitUntil(() => destroyedLate === 1, 2_000);
  });

  it('passes an answer through, leaving no listener behind', async () => {
    const signal = new ClientDisconnect(asResponse(new FakeCallerResponse()));
    const upstreamAnswer = { body: { destroy: () => assert.fail('an answer in time is not destroyed') } };
    assert.equal(await untilAborted(Promise.resolve(upstreamAnswer), signal), upstreamAnswer);
    assert.equal(signal.listenerCount('abort'), 0);
  });
});
