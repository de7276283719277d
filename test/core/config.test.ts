import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig, publicBaseUrl, webhookTimeoutMs } from '../../core/config.ts';

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

  it('reads TRUST_PROXY as named proxies or a hop count, never as "trust everyone"', () => {
    assert.equal(loadConfig({}).TRUST_PROXY, undefined);
    assert.equal(loadConfig({ TRUST_PROXY: ' 10.0.0.0/8, loopback ,::1' }).TRUST_PROXY, '10.0.0.0/8,loopback,::1');
    const hops = loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY as (address: string, hop: number) => boolean;
    assert.deepEqual([hops('203.0.113.1', 0), hops('203.0.113.1', 1), hops('203.0.113.1', 2)], [true, true, false]);
    for (const value of ['true', '*', '0', '10.0.0.0/33', '10.0.0', 'proxy.internal']) assert.throws(() => loadConfig({ TRUST_PROXY: value }), /TRUST_PROXY/, value);
  });

  it('refuses a task deadline longer than 6 hours, which would outgrow a Temporal history', () => {
    assert.equal(loadConfig({ VIDEO_TASK_DEADLINE_SECONDS: '21600' }).VIDEO_TASK_DEADLINE_SECONDS, 21_600);
    assert.throws(() => loadConfig({ VIDEO_TASK_DEADLINE_SECONDS: '21601' }), /VIDEO_TASK_DEADLINE_SECONDS/);
  });

  it('writes the download links\' base with an IPv6 HOST in brackets', () => {
    assert.equal(publicBaseUrl(loadConfig({ HOST: '::1', PORT: '51080' })), 'http://[::1]:51080');
    assert.equal(publicBaseUrl(loadConfig({ HOST: '127.0.0.1', PORT: '8080' })), 'http://127.0.0.1:8080');
    assert.equal(publicBaseUrl(loadConfig({ HOST: '::1', PUBLIC_BASE_URL: 'https://api.example/' })), 'https://api.example');
  });
});
