import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import type { OpenAiStack } from '../helpers/openai-stack.ts';
import { IMPOSSIBLE_USAGE, startScriptedChat, UPSTREAM_USAGE_PRICE, type ScriptedChat } from '../helpers/scripted-chat-upstream.ts';

// What a call is billed from the upstream's own report, against a scripted upstream that
// reports what the simulator never does: token counts that are not whole numbers, more tokens
// than the call can have used, usage on the finish chunk, image entries that hold no image
// and more images than asked for. Relaying: chat-upstream.test.ts; refusals: upstream-refusals.test.ts.

describe('billing from a scripted upstream\'s reports', () => {
  let scripted: ScriptedChat;
  let upstream: ScriptedChat['upstream'];
  let stack: OpenAiStack;
  let client: OpenAI;
  let accountId: string;
  before(async () => {
    scripted = await startScriptedChat('upstream-usage');
    ({ upstream, stack, client, accountId } = scripted);
  });
  after(() => scripted.close());

  const lastRequest = () => upstream.received.at(-1)!;

  it('prices a call from its estimate when the upstream reports token counts that are not whole numbers', async () => {
    const before = await stack.settledAccount(accountId);
    const answered = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'fractional usage' }] });
    assert.equal(answered.choices[0]?.message.content, 'Hello from the fake upstream.');
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'fractional usage' }], stream: true });
    let text = '';
    for await (const part of stream) {
      text += part.choices[0]?.delta.content ?? '';
      // The usage chunk the gateway asked for is not shown, even with counts it could not read.
      assert.equal(part.usage, undefined, JSON.stringify(part));
    }
    assert.equal(text, 'Hello there');
    // Both reservations settled (a lease with one left unsettled never settles), each for a
    // few tokens of estimate: far less than the scripted usage's price.
    const after = await stack.settledAccount(accountId);
    const spent = before.balance_micros - after.balance_micros;
    assert.ok(spent > 0 && spent < UPSTREAM_USAGE_PRICE, `spent ${spent}`);
  });

  it('charges usage beyond what a call can have used at most that: its body\'s bytes in, its max_tokens out', async () => {
    for (const stream of [false, true]) {
      const before = await stack.settledAccount(accountId);
      const messages = [{ role: 'user' as const, content: 'impossible usage' }];
      if (stream) {
        const answer = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 50, stream: true, stream_options: { include_usage: true } });
        let seen;
        for await (const part of answer) seen = part.usage ?? seen;
        // The caller who asked sees what the upstream said; it is charged what can be true.
        assert.deepEqual(seen, IMPOSSIBLE_USAGE);
      } else {
        await client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 50 });
      }
      const bodyBytes = Number(lastRequest().headers['content-length']);
      assert.ok(bodyBytes > 50 && bodyBytes < 400, `body of ${bodyBytes} bytes`);
      const after = await stack.settledAccount(accountId);
      // gpt-4o-mini: 0.15 µ$ an input token, 0.60 an output token.
      assert.equal(before.balance_micros - after.balance_micros, Math.ceil((bodyBytes * 150_000 + 50 * 600_000) / 1_000_000), `stream: ${stream}`);
      const record = (await stack.usageRecords(accountId)).at(-1)!;
      assert.deepEqual([record.input_tokens, record.output_tokens], [bodyBytes, 50], JSON.stringify(record));
    }
  });

  it('charges usage the bytes do not bound when the bound does not apply: a file part', async () => {
    const before = await stack.settledAccount(accountId);
    // The last user message picks the script; a file part beside it is what lifts the input bound.
    await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'user', content: [{ type: 'file', file: { file_id: 'file-abc' } }] },
        { role: 'user', content: 'file usage' },
      ],
    });
    const after = await stack.settledAccount(accountId);
    assert.equal(before.balance_micros - after.balance_micros, Math.ceil((5_000 * 150_000 + 10 * 600_000) / 1_000_000));
  });

  it('hides usage the upstream puts on the finish chunk from a caller who did not ask, and bills it', async () => {
    const before = await stack.settledAccount(accountId);
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'usage on the finish chunk' }], stream: true });
    const chunks = [];
    for await (const part of stream) chunks.push(part);
    assert.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'stop');
    assert.ok(chunks.every((part) => part.usage === undefined), JSON.stringify(chunks.at(-1)));
    const after = await stack.settledAccount(accountId);
    assert.equal(before.balance_micros - after.balance_micros, UPSTREAM_USAGE_PRICE);
  });

  it('neither hands over nor bills image entries that hold no image', async () => {
    const before = await stack.settledAccount(accountId);
    await assert.rejects(client.images.generate({ model: 'gpt-image-1', prompt: 'hollow', n: 2 }, { maxRetries: 0 }), (error: unknown) => error instanceof OpenAI.InternalServerError && error.status === 502);
    const middle = await stack.settledAccount(accountId);
    assert.equal(middle.balance_micros, before.balance_micros);
    const one = await client.images.generate({ model: 'gpt-image-1', prompt: 'one hollow', n: 2 });
    assert.deepEqual(one.data, [{ url: 'https://images.example/0.png' }]);
    const after = await stack.settledAccount(accountId);
    // gpt-image-1 costs $0.04 an image: one image, not the two entries.
    assert.equal(before.balance_micros - after.balance_micros, 40_000);
  });

  it('hands over and bills the images asked for when the upstream sends more', async () => {
    const before = await stack.settledAccount(accountId);
    const generated = await client.images.generate({ model: 'gpt-image-1', prompt: 'a fox', n: 2 });
    assert.deepEqual(generated.data?.map((image) => image.url), ['https://images.example/0.png', 'https://images.example/1.png']);
    const after = await stack.settledAccount(accountId);
    // gpt-image-1 costs $0.04 an image.
    assert.equal(before.balance_micros - after.balance_micros, 2 * 40_000);
  });
});
