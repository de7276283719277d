import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { request } from 'undici';
import type { OpenAiStack } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';
import { afterDone, endlessState, FLOOD_CHUNKS, floodState, halfEvent, PROVIDER_ERROR_WORDS, SPLIT_TEXT, startScriptedChat, thinking, UPSTREAM_MODEL, UPSTREAM_USAGE, UPSTREAM_USAGE_PRICE, type ScriptedChat } from '../helpers/scripted-chat-upstream.ts';

// The gateway against a scripted OpenAI-compatible upstream on loopback, for what the simulator
// cannot show: the exact body forwarded (unknown parameters, the upstream's model id, the
// forced usage request), mid-stream failures and connection retries. What its usage reports
// are billed: upstream-usage-billing.test.ts; its refusals: upstream-refusals.test.ts.

const RETRY_DELAY_MS = 400;

describe('chat against a scripted upstream', () => {
  let scripted: ScriptedChat;
  let upstream: ScriptedChat['upstream'];
  let stack: OpenAiStack;
  let client: OpenAI;
  let accountId: string;
  before(async () => {
    // Retries wait 400 ms (then 800), not 50: a test acts inside that pause (see below).
    scripted = await startScriptedChat('chat-upstream', { retryDelayMs: RETRY_DELAY_MS });
    ({ upstream, stack, client, accountId } = scripted);
  });
  after(() => scripted.close());

  const lastRequest = () => upstream.received.at(-1)!;

  it('forwards parameters it does not know untouched, with the upstream model id and key', async () => {
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'lookup',
          strict: true,
          parameters: { type: 'object', properties: { q: { type: 'string', description: 'query' } }, required: ['q'], additionalProperties: false },
        },
      },
    ];
    const answered = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hello', name: 'ana' }],
      seed: 42,
      logprobs: true,
      top_logprobs: 2,
      response_format: { type: 'json_object' },
      tool_choice: 'auto',
      parallel_tool_calls: false,
      user: 'user-7',
      metadata: { trace: 'abc' },
      temperature: 0.3,
      stop: ['END'],
      tools,
      // Taken on a model without audio (chat-audio.ts refuses only audio asked for), and sent on.
      modalities: ['text'],
      audio: null,
      // @ts-expect-error a vendor parameter the client has no type for
      vendor_knob: { depth: 3 },
    });
    const sent = lastRequest();
    assert.equal(sent.path, '/v1/chat/completions');
    assert.equal(sent.headers.authorization, 'Bearer fake-upstream-key');
    assert.equal(sent.body.model, UPSTREAM_MODEL);
    assert.equal(sent.body.seed, 42);
    assert.equal(sent.body.logprobs, true);
    assert.equal(sent.body.top_logprobs, 2);
    assert.deepEqual(sent.body.response_format, { type: 'json_object' });
    assert.equal(sent.body.tool_choice, 'auto');
    assert.equal(sent.body.parallel_tool_calls, false);
    assert.equal(sent.body.user, 'user-7');
    assert.deepEqual(sent.body.metadata, { trace: 'abc' });
    assert.deepEqual(sent.body.vendor_knob, { depth: 3 });
    assert.deepEqual(sent.body.modalities, ['text']);
    assert.equal(sent.body.audio, null);
    assert.deepEqual(sent.body.stop, ['END']);
    assert.deepEqual(sent.body.messages, [{ role: 'user', content: 'hello', name: 'ana' }]);
    assert.deepEqual(sent.body.tools, tools);
    assert.equal(sent.body.stream_options, undefined);
    // The caller hears its own model id back.
    assert.equal(answered.model, 'gpt-4o-mini');
    assert.equal(answered.system_fingerprint, 'fp_fake');
  });

  it('asks the upstream for usage on every stream, hides it from callers who did not, and rewrites the model id', async () => {
    const before = await stack.settledAccount(accountId);
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'stream' }], stream: true });
    const chunks = [];
    for await (const part of stream) chunks.push(part);
    assert.deepEqual(lastRequest().body.stream_options, { include_usage: true });
    assert.equal(chunks.map((part) => part.choices[0]?.delta.content ?? '').join(''), 'Hello there');
    assert.ok(chunks.every((part) => part.model === 'gpt-4o-mini' && part.choices.length === 1 && !part.usage));
    const after = await stack.settledAccount(accountId);
    assert.equal(before.balance_micros - after.balance_micros, UPSTREAM_USAGE_PRICE);
    assert.equal(after.held_micros, 0);

    // Keeps the caller's own stream options next to the forced one.
    const withUsage = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'stream' }],
      stream: true,
      stream_options: { include_usage: true, include_obfuscation: false } as { include_usage: boolean },
    });
    const seen = [];
    for await (const part of withUsage) seen.push(part);
    assert.deepEqual(lastRequest().body.stream_options, { include_usage: true, include_obfuscation: false });
    assert.deepEqual(seen.at(-1)!.usage, UPSTREAM_USAGE);
  });

  it("keeps characters whole when the upstream's bytes arrive split inside them", async () => {
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'split characters' }], stream: true });
    let text = '';
    for await (const part of stream) text += part.choices[0]?.delta.content ?? '';
    assert.equal(text, SPLIT_TEXT);
  });

  it('ends a stream whose upstream dies with an error event, and bills nothing', async () => {
    for (const said of ['die mid-stream', 'error mid-stream', 'endless event', 'not json mid-stream', 'named error event']) {
      const before = await stack.settledAccount(accountId);
      const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: said }], stream: true });
      let text = '';
      await assert.rejects(
        (async () => {
          for await (const part of stream) text += part.choices[0]?.delta.content ?? '';
        })(),
        (error: unknown) => {
          assert.ok(error instanceof OpenAI.APIError, String(error));
          assert.match(error.message, /mid-stream/);
          if (said === 'endless event') assert.match(error.message, /more than 16 MiB without ending an event/);
          // Not relayed: the caller's client would throw a SyntaxError at that line.
          if (said === 'not json mid-stream') assert.match(error.message, /an event that is not JSON/);
          if (said === 'named error event') assert.match(error.message, /it reported an error/);
          // In the gateway's words: the provider's own go to the log (they can name its account).
          if (said === 'error mid-stream') assert.match(error.message, /failed mid-stream: it reported an error\. Nothing was charged; retry\.$/);
          return true;
        },
        said,
      );
      assert.equal(text, 'Hello there');
      // An event without end is cut off, not read to its last byte.
      if (said === 'endless event') await waitUntil(() => endlessState.cutOff);
      const after = await stack.settledAccount(accountId);
      assert.equal(after.balance_micros, before.balance_micros, said);
      assert.equal(after.held_micros, 0, said);
    }
  });

  it('reads the upstream only as fast as the caller reads the stream', async () => {
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const outgoing = httpRequest(`${stack.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${client.apiKey}`, 'content-type': 'application/json' },
      });
      outgoing.on('response', resolve).on('error', reject);
      outgoing.end(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'flood' }], stream: true }));
    });
    assert.equal(response.statusCode, 200);
    // Take the first bytes, then stop reading for a while.
    await once(response, 'readable');
    response.pause();
    try {
      // Once the socket buffers between upstream, gateway and caller are full, the upstream
      // stalls: wait for its count to hold still for 300 ms (on a loaded machine filling them
      // took longer than the half second once allowed), then for another 300 ms.
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      let stalledAt = -1;
      for (let still = 0, waited = 0; still < 3 && waited < 15_000 && !floodState.finished; waited += 100) {
        const before = floodState.written;
        await sleep(100);
        still = floodState.written === before ? still + 1 : 0;
        stalledAt = floodState.written;
      }
      await sleep(300);
      assert.equal(floodState.finished, false, 'the gateway read the whole upstream while its caller did not read');
      assert.equal(floodState.written, stalledAt, 'the upstream kept writing while the caller did not read');
    } catch (error) {
      // A stream left paused would hold its account's money for the tests after this one.
      response.destroy();
      throw error;
    }

    let text = '';
    response.setEncoding('utf8');
    for await (const piece of response) text += piece;
    assert.ok(floodState.finished);
    assert.equal(text.match(/"content":"x+"/g)?.length, FLOOD_CHUNKS);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  });

  it('answers 502 for a 200 that carries an error instead of a completion, in its own words, and bills nothing', async () => {
    const before = await stack.settledAccount(accountId);
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'error with 200' }] }, { maxRetries: 0 }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError, String(error));
      assert.equal(error.status, 502);
      assert.match(error.message, /answered with an error instead of a chat completion/);
      assert.doesNotMatch(error.message, /org-Operator123|proj_abc/);
      return true;
    });
    assert.ok(PROVIDER_ERROR_WORDS.includes('org-Operator123'));
    const after = await stack.settledAccount(accountId);
    assert.deepEqual([after.balance_micros, after.held_micros], [before.balance_micros, 0]);
  });

  /** Streams `said`, expecting the response head within 2 s, before the scripted upstream is
   * released (`gate`) to send the rest: the whole text, once released. */
  async function headBeforeRelease(said: string, gate: { release: () => void }): Promise<string> {
    const started = request(`${stack.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${client.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: said }], stream: true }),
    });
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no response head within 2 s')), 2_000).unref());
    try {
      const response = await Promise.race([started, timeout]);
      assert.equal(response.statusCode, 200);
      assert.match(String(response.headers['content-type']), /^text\/event-stream/);
      gate.release();
      const text = await response.body.text();
      assert.ok(text.endsWith('data: [DONE]\n\n'));
      return text;
    } finally {
      gate.release();
    }
  }

  it('sends the stream head at once when the upstream\'s first bytes are half an event', async () => {
    assert.match(await headBeforeRelease('half an event first', halfEvent), /"content":"Hel"/);
  });

  it('sends the stream head at once while the upstream has not sent its first chunk', async () => {
    // The head normally leaves with the first chunk (one write); an upstream still thinking
    // must not keep the caller from learning that the call was accepted.
    assert.match(await headBeforeRelease('think first', thinking), /"content":"Done thinking"/);
  });

  it('retries a connection the upstream dropped before answering', async () => {
    const before = upstream.received.length;
    const answered = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'reset first' }] });
    assert.equal(answered.choices[0]!.message.content, 'Hello from the fake upstream.');
    assert.equal(upstream.received.length - before, 2);
  });

  it('waits past an interim 103 answer for the real one, streamed or not', async () => {
    const answered = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hints first' }] });
    assert.equal(answered.choices[0]!.message.content, 'Hello from the fake upstream.');
    let text = '';
    for await (const piece of await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hints first' }] })) text += piece.choices[0]?.delta.content ?? '';
    assert.equal(text, 'Hello there');
  });

  for (const stream of [false, true]) {
    it(`charges nothing to a caller who leaves while a connection the upstream dropped at once waits to be tried again (stream: ${stream})`, async () => {
      const caller = await stack.newCaller(`left-between-tries-${stream}`);
      const before = upstream.received.length;
      const controller = new AbortController();
      const call = stack.client(caller.key).chat.completions.create({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content: 'reset always' }] }, { signal: controller.signal });
      // The first try is dropped as soon as the upstream has it; the next waits RETRY_DELAY_MS.
      // The gateway learns of the drop a moment after the upstream recorded the request: leaving
      // at once could beat it (on a loaded machine it did), and the caller would then have left
      // while the prompt was with the provider, which is billed. So leave a quarter of the way
      // into the pause.
      await waitUntil(() => upstream.received.length > before, 5_000);
      await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS / 4));
      assert.equal(upstream.received.length, before + 1, 'still between the first try and the second');
      controller.abort();
      await assert.rejects(call, OpenAI.APIUserAbortError);
      const account = await stack.settledAccount(caller.accountId);
      assert.equal(account.spent_micros, 0, 'the provider never worked on the prompt');
      assert.equal(account.balance_micros, 10_000_000);
    });
  }

  for (const stream of [false, true]) {
    it(`does not repeat a request whose connection dropped after the upstream had it a while (stream: ${stream})`, async () => {
      const before = await stack.settledAccount(accountId);
      const sent = upstream.received.length;
      await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', stream, messages: [{ role: 'user', content: 'drop late' }] }, { maxRetries: 0 }), (error: unknown) => {
        assert.ok(error instanceof OpenAI.InternalServerError);
        assert.equal(error.status, 502);
        assert.match(error.message, /dropped the connection after \d+\.\d s without answering/);
        return true;
      });
      // It may have been generating (or, for a stream, reading the prompt before its head): a
      // second try would pay the provider twice.
      assert.equal(upstream.received.length - sent, 1);
      const after = await stack.settledAccount(accountId);
      assert.equal(after.balance_micros, before.balance_micros);
      assert.equal(after.held_micros, 0);
    });
  }

  it('answers 502 without repeating the request when a completion breaks off or is not JSON, and bills nothing', async () => {
    const before = await stack.settledAccount(accountId);
    for (const [said, message] of [['break off', /answer broke off/], ['not json', /malformed chat completion/]] as const) {
      const sent = upstream.received.length;
      await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: said }] }, { maxRetries: 0 }), (error: unknown) => {
        assert.ok(error instanceof OpenAI.InternalServerError, said);
        assert.equal(error.status, 502);
        assert.match(error.message, message);
        return true;
      });
      // The upstream did answer: a retry could double work the caller never sees.
      assert.equal(upstream.received.length - sent, 1, said);
    }
    const after = await stack.settledAccount(accountId);
    assert.equal(after.balance_micros, before.balance_micros);
    assert.equal(after.held_micros, 0);
  });

  it('ends a stream at its [DONE] and bills it, whatever the upstream connection does next', async () => {
    for (const said of ['reset after done', 'open after done']) {
      const before = await stack.settledAccount(accountId);
      const started = performance.now();
      const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: said }], stream: true });
      let text = '';
      for await (const part of stream) text += part.choices[0]?.delta.content ?? '';
      assert.equal(text, 'Hello there', said);
      // Not held up by a body the upstream keeps open.
      assert.ok(performance.now() - started < 1_500, `${said}: took ${performance.now() - started} ms`);
      const after = await stack.settledAccount(accountId);
      assert.equal(before.balance_micros - after.balance_micros, UPSTREAM_USAGE_PRICE, said);
    }
    // The body left open is dropped after a grace, not kept for the body timeout.
    const [open] = afterDone.openBodies;
    assert.ok(open);
    await waitUntil(() => open.destroyed || open.socket === null || open.socket.destroyed, 5_000);
  });
});
