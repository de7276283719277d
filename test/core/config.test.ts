import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../core/config.ts';

describe('configuration', () => {
  it('takes a webhook timeout up to 30 s and refuses a longer one, which the attempt\'s 45 s could not cover', () => {
    assert.equal(loadConfig({}).WEBHOOK_TIMEOUT_MS, 15_000);
    assert.equal(loadConfig({ WEBHOOK_TIMEOUT_MS: '30000' }).WEBHOOK_TIMEOUT_MS, 30_000);
    assert.throws(() => loadConfig({ WEBHOOK_TIMEOUT_MS: '45000' }), /WEBHOOK_TIMEOUT_MS: WEBHOOK_TIMEOUT_MS may be at most 30000/);
  });
});
