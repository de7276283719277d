import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { bearer } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// Closing the api (what SIGTERM does) waits for the calls it is serving, but only for
// SHUTDOWN_GRACE_MS: a call that ends within it is answered and billed as usual; a stream or a
// call still running after it is ended by the gateway, with a 503 or a last error event,
// cancelled upstream and not billed. Then the spend leases settle and the close finishes.

const GRACE_MS = 1_500;

/** Sends a chat call and reads its answer as it comes, without waiting for the end. */
function startChat(baseUrl: string, key: string, content: string, stream: boolean) {
  const received: string[] = [];
  const answer = request(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content }] }),
  }).then(async (response) => {
    response.body.setEncoding('utf8');
    for await (const piece of response.body) received.push(piece as string);
    return { status: response.statusCode, headers: response.headers, text: received.join('') };
  });
  return { answer, soFar: () => received.join('') };
}

describe('closing the api while calls run', { timeout: 30_000 }, () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('shutdown-grace', { SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  });
  after(() => stack.close());

  it('answers calls that end within the grace, and ends the rest with a 503 or an error event, unbilled', async () => {
    const streamer = await stack.newCaller('long-stream');
    const waiter = await stack.newCaller('long-call');
    const quick = await stack.newCaller('quick-call');
    const headless = await stack.newCaller('stream-without-head');
    const statsBefore = await stack.simulatorStats();

    const longStream = startChat(stack.baseUrl, streamer.key, 'Tell me a long story about graceful restarts [sim:chunks=300 gap_ms=100]', true);
    const longCall = startChat(stack.baseUrl, waiter.key, 'Think about it for a while [sim:delay_ms=20000]', false);
    const quickCall = startChat(stack.baseUrl, quick.key, 'Answer soon [sim:delay_ms=600]', false);
    // A stream whose upstream has not even sent its head when the grace ends.
    const headlessStream = startChat(stack.baseUrl, headless.key, 'Take long to start [sim:delay_ms=20000]', true);
    // All four reached the upstream, and the first stream has delivered text.
    await waitUntil(async () => (await stack.simulatorStats()).chat_requests - statsBefore.chat_requests === 4, 5_000);
    await waitUntil(() => longStream.soFar().includes('"content"'), 5_000);

    const closing = Date.now();
    await stack.app.close();
    const closeMs = Date.now() - closing;
    // Waited the grace for the long calls, not their end (the stream has minutes left).
    assert.ok(closeMs >= GRACE_MS - 50, `closed after ${closeMs} ms`);
    assert.ok(closeMs < GRACE_MS + 5_000, `closed after ${closeMs} ms`);

    const quickAnswer = await quickCall.answer;
    assert.equal(quickAnswer.status, 200);
    assert.equal(JSON.parse(quickAnswer.text).object, 'chat.completion');

    for (const { answer } of [longCall, headlessStream]) {
      const { status, headers, text } = await answer;
      assert.equal(status, 503);
      assert.equal(headers['retry-after'], '1');
      const refusal = JSON.parse(text) as { error: { code: string; message: string } };
      assert.equal(refusal.error.code, 'service_unavailable');
      assert.match(refusal.error.message, /restarting.*nothing was charged/);
    }

    const streamed = await longStream.answer;
    assert.equal(streamed.status, 200);
    const events = streamed.text.split('\n\n').filter(Boolean);
    assert.ok(events.length > 2, 'text was streamed before the end');
    assert.ok(!streamed.text.includes('[DONE]'));
    const last = JSON.parse(events.at(-1)!.replace(/^data: /, '')) as { error: { code: string; message: string } };
    assert.equal(last.error.code, 'service_unavailable');
    assert.match(last.error.message, /restarting/);
    // The upstream saw the stream cancelled.
    await waitUntil(async () => (await stack.simulatorStats()).chat_streams_aborted > statsBefore.chat_streams_aborted, 5_000);

    // The close settled every lease: the ended calls cost nothing, the quick one its price.
    for (const caller of [streamer, waiter, headless]) {
      const account = await stack.account(caller.accountId);
      assert.equal(account.spent_micros, 0);
      assert.equal(account.held_micros, 0);
      assert.deepEqual((await stack.ledgerEntries(caller.accountId)).map((entry) => entry.operation), ['hold', 'release']);
    }
    const billed = await stack.account(quick.accountId);
    assert.ok(billed.spent_micros > 0);
    assert.equal(billed.held_micros, 0);
  });
});
