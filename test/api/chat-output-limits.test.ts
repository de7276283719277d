import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startApiBeforeUpstream, startFakeUpstream, type OpenAiStack } from '../helpers/openai-stack.ts';

// A body may carry both `max_tokens` and `max_completion_tokens`. Which one an OpenAI-compatible
// upstream obeys is its own choice: many read only `max_tokens` (the older name), some prefer
// it. The hold and the bound on the charge must cover the larger, or a caller who sends
// `max_completion_tokens: 1` beside `max_tokens: 2000` gets 2000 tokens for the price of one.

describe('chat output limits given twice', () => {
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  let client: OpenAI;
  let accountId: string;
  before(async () => {
    // An upstream that knows `max_tokens` alone, and writes that many tokens.
    upstream = await startFakeUpstream((recorded, response) => {
      const tokens = Number(recorded.body.max_tokens ?? 16);
      const completion = {
        id: 'chatcmpl-legacy',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: 'legacy-model',
        choices: [{ index: 0, message: { role: 'assistant', content: 'word '.repeat(tokens).trim() }, finish_reason: 'length' }],
        usage: { prompt_tokens: 10, completion_tokens: tokens, total_tokens: 10 + tokens },
      };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion));
    });
    stack = await startApiBeforeUpstream('chat-output-limits', upstream.url, { upstreamChatModel: 'legacy-model' });
    const caller = await stack.newCaller('limits');
    accountId = caller.accountId;
    client = stack.client(caller.key);
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  it('charges the output the larger limit allowed, not the smaller', async () => {
    const before = await stack.settledAccount(accountId);
    const answer = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 1, max_tokens: 2000 });
    assert.equal(answer.usage?.completion_tokens, 2000);
    const after = await stack.settledAccount(accountId);
    // gpt-4o-mini: 0.60 micro-USD an output token, so 2000 of them alone cost 1,200.
    const spent = before.balance_micros - after.balance_micros;
    assert.ok(spent >= 1_200, `charged ${spent} micro-USD for 2000 output tokens`);
    const record = (await stack.usageRecords(accountId)).at(-1)!;
    assert.equal(record.output_tokens, 2000, JSON.stringify(record));
  });
});
