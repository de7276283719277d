import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig, webhookTimeoutMs } from '../../core/config.ts';

describe('configuration', () => {
  it('uses a webhook timeout up to 30 s, and 30 s with a warning for a longer one, which the attempt\'s 45 s could not cover', () => {
    const warnings: string[] = [];
    const warn = (message: string) => void warnings.push(message);
    assert.equal(webhookTimeoutMs(loadConfig({}), warn), 15_000);
    assert.equal(webhookTimeoutMs(loadConfig({ WEBHOOK_TIMEOUT_MS: '30000' }), warn), 30_000);
    assert.deepEqual(warnings, []);
    assert.equal(webhookTimeoutMs(loadConfig({ WEBHOOK_TIMEOUT_MS: '60000' }), warn), 30_000);
    assert.deepEqual(warnings, ['WEBHOOK_TIMEOUT_MS=60000 is above the 30000 a webhook attempt allows; using 30000']);
  });
});
