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

  it('reads a variable set to nothing as unset, not as an empty HOST (every interface) or a 0', () => {
    const config = loadConfig({ HOST: '', PORT: ' ', WORKER_METRICS_PORT: '', SHUTDOWN_GRACE_MS: '', ADMIN_TOKEN: '' });
    assert.deepEqual([config.HOST, config.PORT, config.WORKER_METRICS_PORT, config.SHUTDOWN_GRACE_MS, config.ADMIN_TOKEN], ['127.0.0.1', 8080, undefined, 20_000, undefined]);
  });

  it('refuses durations Node\'s timers cannot hold, and download links that are not http(s)', () => {
    // Past 2^31 - 1 ms a timer fires after 1 ms: a long grace would have meant none.
    for (const [name, value] of [['SHUTDOWN_GRACE_MS', '3000000000'], ['SHUTDOWN_GRACE_MS', '3600001'], ['REQUEST_TIMEOUT_MS', '3600001'], ['SPEND_LEASE_SMALL_IDLE_MS', '86400001']] as const) {
      assert.throws(() => loadConfig({ [name]: value }), new RegExp(`${name}: must be at most`), `${name}=${value}`);
    }
    assert.equal(loadConfig({ SHUTDOWN_GRACE_MS: '3600000' }).SHUTDOWN_GRACE_MS, 3_600_000);
    for (const url of ['localhost:8080', 'ftp://files.example']) assert.throws(() => loadConfig({ PUBLIC_BASE_URL: url }), /PUBLIC_BASE_URL/, url);
    assert.equal(loadConfig({ PUBLIC_BASE_URL: 'HTTPS://api.example' }).PUBLIC_BASE_URL, 'HTTPS://api.example');
  });

  it('reads TRUST_PROXY as named proxies or a hop count, never as "trust everyone"', () => {
    assert.equal(loadConfig({}).TRUST_PROXY, undefined);
    assert.equal(loadConfig({ TRUST_PROXY: ' 10.0.0.0/8, loopback ,::1' }).TRUST_PROXY, '10.0.0.0/8,loopback,::1');
    const hops = loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY as (address: string, hop: number) => boolean;
    assert.deepEqual([hops('203.0.113.1', 0), hops('203.0.113.1', 1), hops('203.0.113.1', 2)], [true, true, false]);
    for (const value of ['true', '*', '0', '0.0.0.0/0', '::/0', '10.0.0.0/33', '10.0.0', 'proxy.internal']) assert.throws(() => loadConfig({ TRUST_PROXY: value }), /TRUST_PROXY/, value);
  });

  it('refuses a task deadline longer than 6 hours, which would outgrow a Temporal history', () => {
    assert.equal(loadConfig({ VIDEO_TASK_DEADLINE_SECONDS: '21600' }).VIDEO_TASK_DEADLINE_SECONDS, 21_600);
    assert.throws(() => loadConfig({ VIDEO_TASK_DEADLINE_SECONDS: '21601' }), /VIDEO_TASK_DEADLINE_SECONDS/);
  });

  it('keeps tasks unless told, and refuses a retention shorter than the Idempotency-Key records it must outlive', () => {
    assert.equal(loadConfig({}).TASK_RETENTION_DAYS, 0);
    assert.equal(loadConfig({ TASK_RETENTION_DAYS: '0' }).TASK_RETENTION_DAYS, 0);
    assert.equal(loadConfig({ TASK_RETENTION_DAYS: '36500' }).TASK_RETENTION_DAYS, 36_500);
    assert.equal(loadConfig({ TASK_RETENTION_DAYS: '2' }).TASK_RETENTION_DAYS, 2);
    for (const value of ['1', '-1', '1.5', '36501', 'forever']) assert.throws(() => loadConfig({ TASK_RETENTION_DAYS: value }), /TASK_RETENTION_DAYS/, value);
  });

  it('writes the download links\' base with an IPv6 HOST in brackets', () => {
    assert.equal(publicBaseUrl(loadConfig({ HOST: '::1', PORT: '51080' })), 'http://[::1]:51080');
    assert.equal(publicBaseUrl(loadConfig({ HOST: '127.0.0.1', PORT: '8080' })), 'http://127.0.0.1:8080');
    assert.equal(publicBaseUrl(loadConfig({ HOST: '::1', PUBLIC_BASE_URL: 'https://api.example/' })), 'https://api.example');
  });
});
