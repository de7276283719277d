import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startApiBeforeUpstream, startFakeUpstream, type OpenAiStack, type RecordedRequest } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// How a stream ends when the provider or the caller does something the usual tests do not: a
// provider that resets its connection after the answer's last chunk, one that reports usage
// with its first chunk, and a caller that keeps its connection but stops reading. Each was a
// finding of a review of the chat proxy: a whole answer reported as failed and not billed,
// 2,000 words delivered and 2 micro-USD charged, a call held open for good.

const UPSTREAM_MODEL = 'gpt-4o-mini-2024-07-18';
/** The provider's silence that ends a call; also how long a caller may read nothing. */
const BODY_TIMEOUT_MS = 1_000;

const chunk = (delta: object, finishReason: string | null = null, usage?: object) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: UPSTREAM_MODEL, choices: [{ index: 0, delta, finish_reason: finishReason }], ...(usage ? { usage } : {}) })}\n\n`;

const upstreamClosed = { count: 0 };

/** The provider, by what the caller's last message says. */
async function provider(recorded: RecordedRequest, response: ServerResponse): Promise<void> {
  const said = String(recorded.body.messages?.at(-1)?.content ?? '');
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  response.on('close', () => upstreamClosed.count++);
  if (said === 'reset after finish' || said === 'end after finish') {
    // No usage in streams, and no [DONE]: the answer, its finish, then the connection ends.
    response.write(chunk({ content: 'Hello there' }));
    response.write(chunk({}, 'stop'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (said === 'end after finish') response.end();
    else response.socket?.destroy();
    return;
  }
  if (said === 'usage first') {
    // The prompt's usage on the first chunk, the total only at the end.
    response.write(chunk({ content: '' }, null, { prompt_tokens: 10, completion_tokens: 0, total_tokens: 10 }));
    for (let index = 0; index < 200 && !response.destroyed; index++) {
      response.write(chunk({ content: 'word '.repeat(50) }));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    response.end('data: [DONE]\n\n');
    return;
  }
  // A flood, as fast as the gateway takes it.
  for (let index = 0; index < 100_000 && !response.destroyed; index++) {
    if (!response.write(chunk({ content: 'x'.repeat(1000) }))) await Promise.race([once(response, 'drain'), once(response, 'close')]);
  }
  response.end('data: [DONE]\n\n');
}

describe('how chat streams end at their edges', () => {
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  before(async () => {
    upstream = await startFakeUpstream(provider);
    stack = await startApiBeforeUpstream('chat-stream-endings', upstream.url, { upstreamChatModel: UPSTREAM_MODEL, upstreamClient: { bodyTimeoutMs: BODY_TIMEOUT_MS } });
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  function open(key: string, said: string): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const outgoing = httpRequest(`${stack.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } });
      outgoing.on('response', resolve).on('error', reject);
      outgoing.end(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: said }], stream: true, max_tokens: 10_000 }));
    });
  }

  for (const said of ['end after finish', 'reset after finish']) {
    it(`ends a whole answer (every choice finished) with [DONE] and bills it: ${said}`, async () => {
      const caller = await stack.newCaller(said);
      const response = await open(caller.key, said);
      let text = '';
      response.setEncoding('utf8');
      for await (const piece of response) text += piece;
      assert.ok(text.endsWith('data: [DONE]\n\n'), text.slice(-200));
      assert.doesNotMatch(text, /failed mid-stream/);
      const account = await stack.settledAccount(caller.accountId);
      assert.ok(account.spent_micros > 0, `charged ${account.spent_micros}`);
    });
  }

  it('bills a caller who leaves at least what was delivered, though the usage seen so far was a first chunk\'s', async () => {
    const caller = await stack.newCaller('usage-first');
    const response = await open(caller.key, 'usage first');
    let text = '';
    response.setEncoding('utf8');
    response.on('data', (piece: string) => (text += piece));
    await waitUntil(() => (text.match(/word/g)?.length ?? 0) >= 2_000, 10_000);
    response.destroy();
    const delivered = text.match(/word/g)!.length;
    const account = await stack.settledAccount(caller.accountId);
    // At least a token a word, at 0.60 micro-USD an output token (config/catalog.local.json).
    assert.ok(account.spent_micros >= Math.floor(delivered * 0.6), `${delivered} words delivered, ${account.spent_micros} micro-USD charged`);
  });

  it('ends the call of a caller who keeps its connection but stops reading: the provider is let go, and what was delivered billed', async () => {
    const caller = await stack.newCaller('stalled');
    const closedBefore = upstreamClosed.count;
    const response = await open(caller.key, 'flood');
    assert.equal(response.statusCode, 200);
    await once(response, 'readable');
    // Frozen: the socket stays open, nothing more is read.
    response.pause();
    await waitUntil(() => upstreamClosed.count > closedBefore, 10 * BODY_TIMEOUT_MS);
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.held_micros, 0);
    assert.ok(account.spent_micros > 0, 'the chunks written to the caller are billed as delivered');
    response.destroy();
  });
});
