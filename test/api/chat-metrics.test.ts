import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { expectedChatMicros, startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { parsePrometheusText, sampleSum } from '../helpers/prometheus-text.ts';

// What the chat and image proxy report on /metrics: tokens by direction and the money charged,
// exactly as billed, one time-to-first-token observation per stream that delivered text, and
// the upstream's failures as vendor errors.

describe('chat and image metrics', () => {
  let stack: SimulatorStack;
  const logLines: Array<Record<string, any>> = [];
  before(async () => {
    stack = await startOpenAiStack('chat-metrics', { LOG_LEVEL: 'info' }, { write: (line) => void logLines.push(JSON.parse(line)) });
  });
  after(() => stack.close());

  async function samples(): Promise<Map<string, number>> {
    const response = await request(`${stack.baseUrl}/metrics`);
    return parsePrometheusText(await response.body.text());
  }

  it('counts the tokens, spend and first-token time of what was billed', async () => {
    const caller = await stack.newCaller('metrics');
    const client = stack.client(caller.key);
    const before = await samples();
    const whole = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'measure this answer' }] });
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'measure this stream' }] });
    let streamed: { prompt_tokens: number; completion_tokens: number } | undefined;
    for await (const chunk of stream) if (chunk.usage) streamed = chunk.usage;
    await client.images.generate({ model: 'gpt-image-1', prompt: 'a gauge', n: 2 });
    // A failed call moves nothing.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'fail [sim:error=500]' }] }));

    const after = await samples();
    const delta = (name: string, labels: Record<string, string>) => sampleSum(after, name, labels) - sampleSum(before, name, labels);
    const usages = [whole.usage!, streamed!];
    assert.equal(delta('framegate_chat_tokens_total', { model: 'gpt-4o-mini', direction: 'input' }), usages.reduce((sum, usage) => sum + usage.prompt_tokens, 0));
    assert.equal(delta('framegate_chat_tokens_total', { model: 'gpt-4o-mini', direction: 'output' }), usages.reduce((sum, usage) => sum + usage.completion_tokens, 0));
    assert.equal(delta('framegate_spend_micro_usd_total', { kind: 'chat', model: 'gpt-4o-mini' }), usages.reduce((sum, usage) => sum + expectedChatMicros(usage), 0));
    assert.equal(delta('framegate_spend_micro_usd_total', { kind: 'image', model: 'gpt-image-1' }), 80_000);
    assert.equal(delta('framegate_chat_time_to_first_token_seconds_count', { model: 'gpt-4o-mini' }), 1);
    assert.equal(delta('framegate_vendor_errors_total', { vendor: 'simulator-openai', kind: 'transient' }), 1, 'the upstream 500');
    const seconds = delta('framegate_chat_time_to_first_token_seconds_sum', { model: 'gpt-4o-mini' });
    assert.ok(seconds > 0 && seconds < 5, `first token after ${seconds} s`);
  });

  it("counts a provider out of quota as rejected, and logs the provider's failures in one line each", async () => {
    const caller = await stack.newCaller('provider failures');
    const client = stack.client(caller.key);
    const before = await samples();
    logLines.length = 0;
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x [sim:error=429 error_code=insufficient_quota]' }] }));
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x [sim:error=503]' }] }));
    const after = await samples();
    const delta = (labels: Record<string, string>) => sampleSum(after, 'framegate_vendor_errors_total', labels) - sampleSum(before, 'framegate_vendor_errors_total', labels);
    // Out of quota lasts until the operator pays: no retry passes it, so it alerts as rejected.
    assert.deepEqual([delta({ vendor: 'simulator-openai', kind: 'rejected' }), delta({ vendor: 'simulator-openai', kind: 'transient' })], [1, 1]);
    // A provider's failure is no bug of the gateway's: no stack trace; an error only when the
    // operator must act.
    const failures = logLines.filter((line) => line.msg === 'model provider refused the gateway' || line.msg === 'model provider failed');
    assert.deepEqual(failures.map((line) => [line.level, line.msg, line.upstream?.status]), [[50, 'model provider refused the gateway', 429], [40, 'model provider failed', 503]]);
    assert.deepEqual(logLines.filter((line) => line.err !== undefined), [], 'no stack trace');
  });
});
