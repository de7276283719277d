import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { bearer } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// Closing the api (what SIGTERM does) waits for the calls it is serving, but only for
// SHUTDOWN_GRACE_MS: a call that ends within it is answered and billed as usual; a stream or a
// call still running after it is ended by the gateway, with a 503 or a last error event,
// cancelled upstream and not billed. An image call whose caller left runs on with the same
// grace: charged when its images come back within it (the provider bills them either way),
// ended unbilled with the rest when they do not. Connections that go idle meanwhile are closed, and any
// still open 2 s after the grace (a spare socket that never sent a request) are cut. Then the
// spend leases settle and the close finishes. A request that arrives during the close is
// refused with the spec's 503.

const GRACE_MS = 1_500;
const FORCE_AFTER_GRACE_MS = 2_000;
/** gpt-image-1's price in config/catalog.local.json. */
const IMAGE_PRICE_MICROS = 40_000;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Sends a call and reads its answer as it comes, without waiting for the end. */
function startCall(baseUrl: string, key: string, path: string, body: object) {
  const received: string[] = [];
  let finished = false;
  const answer: Promise<Answer> = request(`${baseUrl}/v1${path}`, {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  }).then(async (response) => {
    response.body.setEncoding('utf8');
    for await (const piece of response.body) received.push(piece as string);
    finished = true;
    return { status: response.statusCode, headers: response.headers, text: received.join('') };
  });
  return { answer, soFar: () => received.join(''), finished: () => finished };
}

const chat = (content: string, stream: boolean) => ({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content }] });

function assertRestartRefusal({ status, headers, text }: Answer): void {
  assert.equal(status, 503);
  assert.equal(headers['retry-after'], '1');
  const refusal = JSON.parse(text) as { error: { code: string; message: string } };
  assert.equal(refusal.error.code, 'service_unavailable');
  assert.match(refusal.error.message, /restarting.*nothing was charged/);
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
    const headless = await stack.newCaller('stream-without-head');
    const painter = await stack.newCaller('long-image');
    const quick = await stack.newCaller('quick-call');
    const leaver = await stack.newCaller('image-left');
    const quickLeaver = await stack.newCaller('image-left-back-in-time');
    const statsBefore = await stack.simulatorStats();

    const longStream = startCall(stack.baseUrl, streamer.key, '/chat/completions', chat('Tell me a long story about graceful restarts [sim:chunks=300 gap_ms=100]', true));
    const longCall = startCall(stack.baseUrl, waiter.key, '/chat/completions', chat('Think about it for a while [sim:delay_ms=20000]', false));
    // A stream whose upstream has not even sent its head when the grace ends.
    const headlessStream = startCall(stack.baseUrl, headless.key, '/chat/completions', chat('Take long to start [sim:delay_ms=20000]', true));
    const longImage = startCall(stack.baseUrl, painter.key, '/images/generations', { model: 'gpt-image-1', prompt: 'a slow sunrise [sim:delay_ms=20000]' });
    const quickCall = startCall(stack.baseUrl, quick.key, '/chat/completions', chat('Answer soon [sim:delay_ms=900]', false));
    // An image call whose caller left once the provider had it: it runs on (carried-call.ts).
    const leftImage = new AbortController();
    const leftImageCall = request(`${stack.baseUrl}/v1/images/generations`, {
      method: 'POST',
      headers: { ...bearer(leaver.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-image-1', prompt: 'a sunrise nobody waits for [sim:delay_ms=20000]' }),
      signal: leftImage.signal,
    }).catch(() => undefined);
    // Every call reached the upstream, and the first stream has delivered text.
    await waitUntil(async () => (await stack.simulatorStats()).chat_requests - statsBefore.chat_requests === 4, 5_000);
    await waitUntil(async () => (await stack.simulatorStats()).image_requests - statsBefore.image_requests === 2, 5_000);
    await waitUntil(() => longStream.soFar().includes('"content"'), 5_000);
    leftImage.abort();
    await leftImageCall;
    // A client's spare connection that never sends a request: Node never counts it idle.
    const port = (stack.app.server.address() as { port: number }).port;
    const spare = connect(port, '127.0.0.1');
    await new Promise((resolve) => spare.once('connect', resolve));
    const spareClosed = new Promise((resolve) => spare.once('close', resolve));

    // A request whose head is half sent when the close begins, so it arrives during the close
    // on a connection that was already open (Node does not count that connection idle).
    const late = connect(port, '127.0.0.1');
    await new Promise((resolve) => late.once('connect', resolve));
    late.setEncoding('utf8');
    let lateAnswer = '';
    late.on('data', (piece: string) => (lateAnswer += piece));
    late.write('GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\n');

    assert.ok(!quickCall.finished(), 'the quick call is still running when the close begins');
    assert.equal((await stack.simulatorStats()).image_requests_left, statsBefore.image_requests_left, 'the left image runs on');
    // An image whose caller leaves just before the close and whose provider answers within the
    // grace: the close waits for it though no connection is left to wait on.
    const backInTime = new AbortController();
    const backInTimeCall = request(`${stack.baseUrl}/v1/images/generations`, {
      method: 'POST',
      headers: { ...bearer(quickLeaver.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-image-1', prompt: 'a sunrise back soon [sim:delay_ms=1000]' }),
      signal: backInTime.signal,
    }).catch(() => undefined);
    await waitUntil(async () => (await stack.simulatorStats()).image_requests - statsBefore.image_requests === 3, 5_000);
    const backInTimeSent = Date.now();
    backInTime.abort();
    await backInTimeCall;
    const closing = Date.now();
    assert.ok(closing - backInTimeSent < 900, 'the provider is still making the image when the close begins');
    const closed = stack.app.close();
    await waitUntil(() => !stack.app.server.listening, 2_000);
    // Both left images run on into the close: the one the provider answers in time, and the
    // one the grace's end interrupts.
    assert.equal((await stack.simulatorStats()).image_requests_left, statsBefore.image_requests_left);
    late.write(`authorization: Bearer ${quick.key}\r\n\r\n`);
    await closed;
    const closeMs = Date.now() - closing;
    await spareClosed;
    // Waited for the grace and then the spare socket, not for the long calls' end (the stream
    // had 30 s left, the others 20 s).
    assert.ok(closeMs >= GRACE_MS + FORCE_AFTER_GRACE_MS - 50, `closed after ${closeMs} ms`);
    assert.ok(closeMs < GRACE_MS + FORCE_AFTER_GRACE_MS + 5_000, `closed after ${closeMs} ms`);

    // The late request is refused in the spec's shape, and its connection is not kept.
    const [lateHead = '', lateBody = ''] = lateAnswer.split('\r\n\r\n');
    assert.match(lateHead, /^HTTP\/1\.1 503 /);
    assert.match(lateHead, /^retry-after: 1$/im);
    assert.match(lateHead, /^connection: close$/im);
    const lateRefusal = JSON.parse(lateBody) as { error: { type: string; code: string; message: string } };
    assert.equal(lateRefusal.error.type, 'service_unavailable_error');
    assert.equal(lateRefusal.error.code, 'service_unavailable');
    assert.match(lateRefusal.error.message, /restarting and takes no new calls/);

    const quickAnswer = await quickCall.answer;
    assert.equal(quickAnswer.status, 200);
    assert.equal(JSON.parse(quickAnswer.text).object, 'chat.completion');

    for (const call of [longCall, headlessStream, longImage]) assertRestartRefusal(await call.answer);

    const streamed = await longStream.answer;
    assert.equal(streamed.status, 200);
    const events = streamed.text.split('\n\n').filter(Boolean);
    assert.ok(events.length > 2, 'text was streamed before the end');
    assert.ok(!streamed.text.includes('[DONE]'));
    const last = JSON.parse(events.at(-1)!.replace(/^data: /, '')) as { error: { code: string; message: string } };
    assert.equal(last.error.code, 'service_unavailable');
    assert.match(last.error.message, /restarting/);
    // The upstream saw both streams cancelled, the one relaying and the one without a head.
    await waitUntil(async () => (await stack.simulatorStats()).chat_streams_aborted === statsBefore.chat_streams_aborted + 2, 5_000);

    // The close settled every lease: the ended calls cost nothing, the quick one and the image
    // back within the grace their price.
    assert.equal((await stack.simulatorStats()).image_requests_left, statsBefore.image_requests_left + 2);
    for (const caller of [streamer, waiter, headless, painter, leaver]) {
      const account = await stack.account(caller.accountId);
      assert.equal(account.spent_micros, 0);
      assert.equal(account.held_micros, 0);
      assert.deepEqual((await stack.ledgerEntries(caller.accountId)).map((entry) => entry.operation), ['hold', 'release']);
    }
    const billed = await stack.account(quick.accountId);
    assert.ok(billed.spent_micros > 0);
    assert.equal(billed.held_micros, 0);
    const imageBilled = await stack.account(quickLeaver.accountId);
    assert.equal(imageBilled.spent_micros, IMAGE_PRICE_MICROS, 'the image back within the grace is charged, once');
    assert.equal(imageBilled.held_micros, 0);
  });
});

describe('closing the api while only an image its caller left runs', { timeout: 30_000 }, () => {
  // Room for two 6 MiB images and their record in pieces on a loaded machine (the suite runs two
  // files at once): with 1.5 s the grace sometimes ran out first, and the call was cut.
  const LEFT_IMAGE_GRACE_MS = 6_000;
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('shutdown-left-image', { SHUTDOWN_GRACE_MS: String(LEFT_IMAGE_GRACE_MS) });
  });
  after(() => stack.close());

  it('waits for the image, though no connection is left, charges it and keeps its answer for a retry before the store closes', async () => {
    const leaver = await stack.newCaller('image-left-alone');
    const statsBefore = await stack.simulatorStats();
    const left = new AbortController();
    // Two large images: their answer goes to the Idempotency-Key record in pieces, which takes
    // longer than the rest of the close.
    const call = request(`${stack.baseUrl}/v1/images/generations`, {
      method: 'POST',
      headers: { ...bearer(leaver.key), 'content-type': 'application/json', 'idempotency-key': 'left-at-restart' },
      body: JSON.stringify({ model: 'gpt-image-1', n: 2, prompt: 'a sunrise nobody waits for [sim:delay_ms=700 image_kib=6000]' }),
      signal: left.signal,
    }).catch(() => undefined);
    await waitUntil(async () => (await stack.simulatorStats()).image_requests === statsBefore.image_requests + 1, 5_000);
    const sent = Date.now();
    left.abort();
    await call;
    const closing = Date.now();
    assert.ok(closing - sent < 600, 'the provider is still making the image when the close begins');
    await stack.app.close();
    const closeMs = Date.now() - closing;
    // What the api process does next is close the store (api/server.ts): the record must be
    // written by now, or a retry under the key would pay for the images again.
    const record = await stack.database.db.collection('idempotency_keys').findOne({});
    assert.equal(record?.state, 'completed', 'the answer is kept for a retry when the close ends');
    // The close waited for the image and its record, and no longer than they took: not for its
    // whole grace.
    assert.ok(closeMs < LEFT_IMAGE_GRACE_MS, `closed after ${closeMs} ms`);
    assert.equal((await stack.simulatorStats()).image_requests_left, statsBefore.image_requests_left);
    const account = await stack.account(leaver.accountId);
    assert.equal(account.spent_micros, 2 * IMAGE_PRICE_MICROS);
    assert.equal(account.held_micros, 0);
  });
});
