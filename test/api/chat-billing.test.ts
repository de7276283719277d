import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { scratchDirectory } from '../helpers/scratch-directory.ts';
import { adminHeaders } from '../helpers/app.ts';
import { expectedChatMicros, startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// What chat calls cost: the token price of the upstream's usage, exactly; nothing for a failed
// call; a refusal when the balance does not cover the worst case; and, for a stream the caller
// abandons, an upstream that is really cancelled and a charge no larger than the hold.

describe('chat billing', () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('chat-billing');
  });
  after(() => stack.close());

  it('charges exactly the token price of the upstream usage and records it for the key', async () => {
    const caller = await stack.newCaller('exact');
    const before = await stack.settledAccount(caller.accountId);
    const completion = await stack.client(caller.key).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Price this short answer for me please' }],
    });
    const price = expectedChatMicros(completion.usage!);
    assert.ok(price > 0);
    const after = await stack.settledAccount(caller.accountId);
    assert.equal(before.balance_micros - after.balance_micros, price);
    assert.equal(after.spent_micros, price);
    assert.equal(after.held_micros, 0);

    const [usage, ...others] = await stack.usageRecords(caller.accountId, 1);
    assert.equal(others.length, 0);
    assert.equal(usage!.kind, 'chat');
    assert.equal(usage!.model, 'gpt-4o-mini');
    assert.equal(usage!.input_tokens, completion.usage!.prompt_tokens);
    assert.equal(usage!.output_tokens, completion.usage!.completion_tokens);
    assert.equal(usage!.spend_micros, price);
    assert.equal(usage!.requests, 1);

    // The hold was the worst case (the model's whole output budget) and the capture returned the rest.
    const entries = await stack.ledgerEntries(caller.accountId);
    assert.deepEqual(entries.map((entry) => entry.operation), ['hold', 'capture']);
    assert.ok(entries[0]!.amount_micros > price);
    assert.equal(entries[1]!.amount_micros, price);
  });

  it('charges a stream the usage the upstream reported, even when the caller did not ask to see it', async () => {
    const caller = await stack.newCaller('stream');
    const client = stack.client(caller.key);
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'A streamed answer costs the same as a whole one' }];
    const whole = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
    const afterWhole = await stack.settledAccount(caller.accountId);

    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    assert.equal(text, whole.choices[0]!.message.content);

    const afterStream = await stack.settledAccount(caller.accountId);
    assert.equal(afterWhole.balance_micros - afterStream.balance_micros, expectedChatMicros(whole.usage!));
    assert.equal(afterStream.held_micros, 0);
    const records = await stack.usageRecords(caller.accountId, 2);
    assert.equal(records.length, 2);
    assert.ok(records.every((record) => record.output_tokens === whole.usage!.completion_tokens));
  });

  it('bills nothing and holds nothing for a call the upstream fails', async () => {
    const caller = await stack.newCaller('failed');
    const before = await stack.settledAccount(caller.accountId);
    const client = stack.client(caller.key);
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'fail [sim:error=500]' }] }), OpenAI.InternalServerError);
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'fail [sim:error=503]' }] }),
      OpenAI.InternalServerError,
    );
    const after = await stack.settledAccount(caller.accountId);
    assert.equal(after.balance_micros, before.balance_micros);
    assert.equal(after.held_micros, 0);
    assert.equal(after.spent_micros, 0);
    assert.deepEqual(await stack.usageRecords(caller.accountId), []);
    // Both calls reserved from a spend lease, which went back whole: one lease, or two on a
    // machine slow enough for the first to settle (0.3 s idle) before the second call came.
    const entries = await stack.ledgerEntries(caller.accountId);
    const leases = entries.length / 2;
    assert.ok(leases === 1 || leases === 2, entries.map((entry) => entry.operation).join(', '));
    for (let lease = 0; lease < leases; lease++) {
      const [hold, release] = [entries[2 * lease]!, entries[2 * lease + 1]!];
      assert.deepEqual([hold.operation, release.operation], ['hold', 'release']);
      assert.equal(release.amount_micros, hold.amount_micros);
    }
  });

  it('refuses with 403 insufficient_balance when the balance does not cover the worst case', async () => {
    // 16384 output tokens at $0.60 per million is about $0.0098; one cent covers a capped call only.
    const caller = await stack.newCaller('poor', 0.005);
    const client = stack.client(caller.key);
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.PermissionDeniedError);
      assert.equal((error.error as { type?: string; code?: string }).code, 'insufficient_balance');
      assert.match(error.message, /max_tokens/);
      return true;
    });
    const untouched = await stack.settledAccount(caller.accountId);
    assert.equal(untouched.balance_micros, 5_000);
    assert.equal(untouched.held_micros, 0);

    // A smaller output budget fits the same balance.
    const completion = await client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    const after = await stack.settledAccount(caller.accountId);
    assert.equal(after.balance_micros, 5_000 - expectedChatMicros(completion.usage!));
  });

  it('holds a prompt at its most, so parallel calls on the last cents are all paid for in full', async () => {
    // 'a a a …': two characters a token, twice what the 4-character estimate counts. Held at the
    // estimate, each call was charged beyond its hold, and on an account with a cent the
    // overage had no balance to come from: 4 calls got through and one cent paid for 1.5.
    const caller = await stack.newCaller('last cents', 0.01);
    const client = stack.client(caller.key);
    const content = 'a '.repeat(20_000);
    const answers = await Promise.allSettled(Array.from({ length: 12 }, () => client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 1, messages: [{ role: 'user', content }] })));
    const served = answers.flatMap((answer) => (answer.status === 'fulfilled' ? [answer.value] : []));
    for (const answer of answers) {
      if (answer.status === 'rejected') assert.ok(answer.reason instanceof OpenAI.PermissionDeniedError, String(answer.reason));
    }
    assert.ok(served.length >= 1, 'the cent pays for at least one such call');
    const after = await stack.settledAccount(caller.accountId);
    const owed = served.reduce((sum, completion) => sum + expectedChatMicros(completion.usage!), 0);
    assert.equal(after.spent_micros, owed, `${served.length} calls served, each charged its whole usage`);
    assert.equal(after.balance_micros, 10_000 - owed);
  });

  it('holds all a call can be billed for: an output limit above the model\'s is refused, a prediction is held at the output price', async () => {
    // A review's calls were billed more than their hold and their balance (the rest lost): a
    // max_tokens of 100 million on $0.012, and a 300 KB prediction on $0.025.
    const caller = await stack.newCaller('worst case', 0.025);
    const client = stack.client(caller.key);
    for (const field of ['max_tokens', 'max_completion_tokens'] as const) {
      await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], [field]: 100_000_000 }), (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, String(error));
        assert.equal(error.param, field);
        assert.equal(error.message, `400 Invalid field '${field}': must be at most 16384, the most output tokens a model here makes`);
        return true;
      });
    }
    const statsBefore = await stack.simulatorStats();
    // Its rejected tokens are billed as output: 300,000 bytes may be 300,000 tokens at $0.60 a million.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi [sim:chunks=300000]' }], prediction: { type: 'content', content: 'x'.repeat(300_000) } }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.PermissionDeniedError, String(error));
      assert.equal((error.error as { code?: string }).code, 'insufficient_balance');
      return true;
    });
    assert.equal((await stack.simulatorStats()).chat_requests, statsBefore.chat_requests, 'the upstream was not asked');
    const untouched = await stack.settledAccount(caller.accountId);
    assert.deepEqual([untouched.balance_micros, untouched.held_micros, untouched.spent_micros], [25_000, 0, 0]);

    // A prediction the balance covers runs, and is billed what the upstream reports.
    const small = await client.chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], prediction: { type: 'content', content: 'x'.repeat(1_000) } });
    assert.equal((await stack.settledAccount(caller.accountId)).balance_micros, 25_000 - expectedChatMicros(small.usage!));
  });

  it('an operator can take back money a spend lease keeps idle for calls to come', async () => {
    // A review's $20 account made one tiny call; its api's lease kept $1 aside, and a $19.50
    // deduction was a 409 ("held for calls in flight") for five minutes, with nothing in flight.
    const caller = await stack.newCaller('deducted after a call', 20);
    const completion = await stack.client(caller.key).chat.completions.create({ model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    const leased = await stack.account(caller.accountId);
    assert.ok(leased.held_micros > 0, 'a lease keeps money aside after the call');
    const deducted = await stack.app.inject({ method: 'POST', url: `/admin/accounts/${caller.accountId}/deductions`, headers: adminHeaders, payload: { amount_usd: 19.5 } });
    assert.equal(deducted.statusCode, 200, deducted.body);
    const settled = await stack.settledAccount(caller.accountId);
    assert.equal(settled.balance_micros, 20_000_000 - 19_500_000 - expectedChatMicros(completion.usage!));
    // More than there is, leases included, is still refused, naming what is free.
    const tooMuch = await stack.app.inject({ method: 'POST', url: `/admin/accounts/${caller.accountId}/deductions`, headers: adminHeaders, payload: { amount_usd: 1 } });
    assert.equal(tooMuch.statusCode, 409);
    assert.match(tooMuch.json().error.message, /free balance is \$0\.49/);
  });

  it('charges the prompt alone when the caller gives up on a non-streamed call the provider had', async () => {
    const caller = await stack.newCaller('impatient');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const started = Date.now();
    await assert.rejects(
      stack.client(caller.key).chat.completions.create(
        { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'take your time [sim:delay_ms=3000]' }] },
        { signal: controller.signal },
      ),
      OpenAI.APIUserAbortError,
    );
    // The provider bills the prompt it was sent: before, the call was free, however large its
    // prompt and however often it was abandoned.
    await assertPromptOnlyCharged(caller.accountId, 10_000_000);
    // Settled as soon as the caller left, not when the upstream would have answered.
    assert.ok(Date.now() - started < 2_500);
  });

  it('charges the prompt alone for a stream abandoned once its head came, before any output', async () => {
    const caller = await stack.newCaller('impatient-stream');
    const controller = new AbortController();
    const stream = await stack.client(caller.key).chat.completions.create(
      { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'think before you speak [sim:chunks=3 gap_ms=3000]' }] },
      { signal: controller.signal },
    );
    controller.abort();
    // The SDK ends the iteration quietly once aborted: nothing of the answer came.
    let output = '';
    for await (const chunk of stream) output += chunk.choices[0]?.delta.content ?? '';
    assert.equal(output, '');
    await assertPromptOnlyCharged(caller.accountId, 10_000_000);
  });

  it('charges the prompt alone for a stream abandoned before its head came, once the provider had it', async () => {
    const caller = await stack.newCaller('impatient-before-head');
    const statsBefore = await stack.simulatorStats();
    const controller = new AbortController();
    const streaming = stack.client(caller.key).chat.completions.create(
      { model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'read it all first [sim:delay_ms=3000]' }] },
      { signal: controller.signal },
    );
    // The provider has the request (it sends the head only once it has read the prompt).
    await waitUntil(async () => (await stack.simulatorStats()).chat_requests === statsBefore.chat_requests + 1);
    controller.abort();
    await assert.rejects(streaming, OpenAI.APIUserAbortError);
    // Before, such a stream was free however large its prompt: the gateway did not learn when a
    // stream's request went out.
    await assertPromptOnlyCharged(caller.accountId, 10_000_000);
  });

  /** The account paid the price of its one call's prompt estimate and no output. */
  async function assertPromptOnlyCharged(accountId: string, startMicros: number): Promise<void> {
    const [usage] = await stack.usageRecords(accountId, 1);
    assert.ok(usage!.input_tokens > 5 && usage!.input_tokens < 60, `input tokens ${usage!.input_tokens}`);
    assert.equal(usage!.output_tokens, 0);
    const price = expectedChatMicros({ prompt_tokens: usage!.input_tokens, completion_tokens: 0 });
    assert.equal(usage!.spend_micros, price);
    const account = await stack.settledAccount(accountId);
    assert.equal(account.spent_micros, price);
    assert.equal(account.balance_micros, startMicros - price);
    assert.deepEqual((await stack.ledgerEntries(accountId)).map((entry) => entry.operation), ['hold', 'capture']);
  }

  it('cancels the upstream when the caller abandons a stream, and charges no more than the hold', async () => {
    const caller = await stack.newCaller('cancel');
    const before = await stack.settledAccount(caller.accountId);
    const statsBefore = await stack.simulatorStats();
    const stream = await stack.client(caller.key).chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'Tell me a long story about gateways that cancel upstream requests when callers leave [sim:slow]' }],
    });
    let received = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) received++;
      if (received === 3) break; // leaving the loop aborts the HTTP request
    }
    assert.equal(received, 3);

    const deadline = Date.now() + 5_000;
    while ((await stack.simulatorStats()).chat_streams_aborted === statsBefore.chat_streams_aborted) {
      assert.ok(Date.now() < deadline, 'the simulator never saw the upstream stream aborted');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const after = await stack.settledAccount(caller.accountId);
    const entries = await stack.ledgerEntries(caller.accountId);
    const hold = entries.find((entry) => entry.operation === 'hold')!;
    const capture = entries.find((entry) => entry.operation === 'capture')!;
    assert.ok(capture, 'the delivered part is captured');
    assert.ok(after.spent_micros > 0, 'what was delivered is paid for');
    assert.ok(after.spent_micros <= hold.amount_micros);
    assert.equal(after.spent_micros, capture.amount_micros);
    assert.equal(before.balance_micros - after.balance_micros, after.spent_micros);
    const [usage] = await stack.usageRecords(caller.accountId, 1);
    assert.ok(usage!.output_tokens >= 3 && usage!.output_tokens < 40, `output tokens ${usage!.output_tokens}`);
  });
});

describe('an output limit above the model\'s own, under the largest of the catalog', () => {
  let stack: SimulatorStack;
  before(async () => {
    // A second chat model that makes fewer output tokens than gpt-4o-mini.
    const catalog = JSON.parse(await readFile('config/catalog.local.json', 'utf8')) as { models: Array<Record<string, unknown>> };
    const chat = catalog.models.find((model) => model.id === 'gpt-4o-mini')!;
    catalog.models.push({ ...chat, id: 'short-chat', max_output_tokens: 100 });
    const file = path.join(scratchDirectory('catalog'), 'catalog.json');
    await writeFile(file, JSON.stringify(catalog));
    stack = await startOpenAiStack('chat-short-model', { CATALOG_FILE: file });
  });
  after(() => stack.close());

  it("is refused by that model's own limit, before anything is held", async () => {
    const caller = await stack.newCaller('short', 1);
    await assert.rejects(stack.client(caller.key).chat.completions.create({ model: 'short-chat', max_tokens: 101, messages: [{ role: 'user', content: 'hi' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError, String(error));
      assert.equal(error.param, 'max_tokens');
      assert.equal(error.message, "400 max_tokens is too large: 101. The model 'short-chat' makes at most 100 output tokens.");
      return true;
    });
    const untouched = await stack.settledAccount(caller.accountId);
    assert.deepEqual([untouched.balance_micros, untouched.held_micros], [1_000_000, 0]);
    await stack.client(caller.key).chat.completions.create({ model: 'short-chat', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
  });
});
