import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { countChatCharge, countImageCharge, metricsRegistry, observeTimeToFirstToken } from '../../core/metrics.ts';
import { parsePrometheusText, sampleSum } from '../helpers/prometheus-text.ts';

// The helpers the chat and image proxy call to count what they bill and how fast a stream
// starts: each call moves exactly the series it names.

async function samples(): Promise<Map<string, number>> {
  return parsePrometheusText(await metricsRegistry.metrics());
}

describe('metric helpers for the chat and image proxy', () => {
  it('countChatCharge adds the tokens by direction and the micro-USD charged', async () => {
    const before = await samples();
    countChatCharge('gpt-4o-mini', { inputTokens: 12, outputTokens: 30 }, 21);
    countChatCharge('gpt-4o-mini', { inputTokens: 3, outputTokens: 0 }, 1);
    const after = await samples();
    const delta = (name: string, labels: Record<string, string>) => sampleSum(after, name, labels) - sampleSum(before, name, labels);
    assert.equal(delta('framegate_chat_tokens_total', { model: 'gpt-4o-mini', direction: 'input' }), 15);
    assert.equal(delta('framegate_chat_tokens_total', { model: 'gpt-4o-mini', direction: 'output' }), 30);
    assert.equal(delta('framegate_spend_micro_usd_total', { kind: 'chat', model: 'gpt-4o-mini' }), 22);
  });

  it('countImageCharge adds image spend under its own kind', async () => {
    const before = await samples();
    countImageCharge('gpt-image-1', 80_000);
    const after = await samples();
    assert.equal(sampleSum(after, 'framegate_spend_micro_usd_total', { kind: 'image' }) - sampleSum(before, 'framegate_spend_micro_usd_total', { kind: 'image' }), 80_000);
    assert.equal(sampleSum(after, 'framegate_spend_micro_usd_total', { kind: 'chat' }), sampleSum(before, 'framegate_spend_micro_usd_total', { kind: 'chat' }));
  });

  it('observeTimeToFirstToken records the seconds since the request started', async () => {
    const startedAt = performance.now() - 250;
    observeTimeToFirstToken('gpt-4o-mini', startedAt);
    const after = await samples();
    assert.equal(sampleSum(after, 'framegate_chat_time_to_first_token_seconds_count', { model: 'gpt-4o-mini' }), 1);
    const seconds = sampleSum(after, 'framegate_chat_time_to_first_token_seconds_sum', { model: 'gpt-4o-mini' });
    assert.ok(seconds >= 0.25 && seconds < 5, `${seconds} s`);
    assert.equal(sampleSum(after, 'framegate_chat_time_to_first_token_seconds_bucket', { model: 'gpt-4o-mini', le: '0.1' }), 0);
    assert.equal(sampleSum(after, 'framegate_chat_time_to_first_token_seconds_bucket', { model: 'gpt-4o-mini', le: '0.5' }), 1);
  });
});
