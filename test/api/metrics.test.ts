import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { loadConfig } from '../../core/config.ts';
import { OPERATOR_TOKEN_GUESSES } from '../../core/failures-by-address.ts';
import { bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { parsePrometheusText, sampleSum } from '../helpers/prometheus-text.ts';
import { videoClient } from '../helpers/video-client.ts';
import { clearOfWindowEdge } from '../helpers/window-edge.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// GET /metrics after real traffic: requests by route pattern and status, and what the video
// path did (tasks by state, the webhook, the vendor's refusal, the money). The worker runs in
// this process here, so its counters show on the api's /metrics too; in production each
// process serves its own (worker/metrics-server.ts).

async function scrape(baseUrl: string): Promise<{ contentType: string; text: string; samples: Map<string, number> }> {
  const response = await request(`${baseUrl}/metrics`);
  const text = await response.body.text();
  assert.equal(response.statusCode, 200);
  return { contentType: String(response.headers['content-type']), text, samples: parsePrometheusText(text) };
}

/** Scrapes until `settled` holds: a few counters move just after the answer that caused them. */
async function scrapeUntil(baseUrl: string, settled: (samples: Map<string, number>) => boolean): Promise<Map<string, number>> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { samples } = await scrape(baseUrl);
    if (settled(samples) || Date.now() > deadline) return samples;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('GET /metrics', () => {
  let stack: VideoStack;
  let key: string;
  before(async () => {
    stack = await startVideoStack('metrics');
    const account = await createAccount(stack.app, { name: 'metrics', balance_usd: 100 });
    key = (await createKey(stack.app, account.id)).key;
  });
  after(() => stack.close());

  it('serves the Prometheus text format with every Framegate metric declared', async () => {
    const { contentType, text } = await scrape(stack.baseUrl);
    assert.match(contentType, /^text\/plain; version=0\.0\.4/);
    for (const family of [
      'framegate_http_request_duration_seconds histogram',
      'framegate_chat_time_to_first_token_seconds histogram',
      'framegate_chat_tokens_total counter',
      'framegate_spend_micro_usd_total counter',
      'framegate_video_task_transitions_total counter',
      'framegate_webhook_attempts_total counter',
      'framegate_vendor_errors_total counter',
      'process_cpu_seconds_total counter',
    ]) {
      assert.ok(text.includes(`# TYPE ${family}`), family);
    }
  });

  it('counts requests by route pattern and status, never by raw URL', async () => {
    const before = (await scrape(stack.baseUrl)).samples;
    for (let index = 0; index < 3; index++) {
      assert.equal((await request(`${stack.baseUrl}/v1/models`, { headers: bearer(key) })).statusCode, 200);
    }
    assert.equal((await request(`${stack.baseUrl}/v1/video/generations/task_nonexistent42`, { headers: bearer(key) })).statusCode, 404);
    assert.equal((await request(`${stack.baseUrl}/v1/no-such-route-77`, { headers: bearer(key) })).statusCode, 404);

    const { text, samples } = await scrape(stack.baseUrl);
    const count = (labels: Record<string, string>) =>
      sampleSum(samples, 'framegate_http_request_duration_seconds_count', labels) - sampleSum(before, 'framegate_http_request_duration_seconds_count', labels);
    assert.equal(count({ method: 'GET', route: '/v1/models', status_code: '200' }), 3);
    assert.equal(count({ method: 'GET', route: '/v1/video/generations/:task_id', status_code: '404' }), 1);
    assert.equal(count({ method: 'GET', route: 'unmatched', status_code: '404' }), 1);
    assert.ok(!text.includes('nonexistent42') && !text.includes('no-such-route-77'), 'raw URLs never become labels');
    const seconds = sampleSum(samples, 'framegate_http_request_duration_seconds_sum', { route: '/v1/models' });
    assert.ok(seconds > 0 && seconds < 30, `a plausible total duration: ${seconds}`);
  });

  it('counts video tasks by state, the webhook, the vendor refusal and the money charged', async () => {
    const receiver = await startWebhookReceiver([200]);
    try {
      const before = (await scrape(stack.baseUrl)).samples;
      const client = videoClient(stack.baseUrl, key);
      const succeeded = await client.submit({
        model: 'seedance-2.0',
        prompt: 'a lighthouse at dusk [sim:delay=0]',
        seconds: '5',
        metadata: { resolution: '720p', callback_url: receiver.url },
      });
      const refused = await client.submit({ model: 'seedance-2.0', prompt: 'a storm [sim:reject]', seconds: '5' });
      assert.equal(succeeded.status, 200, JSON.stringify(succeeded.json));
      assert.equal(refused.status, 200, JSON.stringify(refused.json));
      assert.equal((await client.waitForFinal(succeeded.json.task_id)).status, 'succeeded');
      assert.equal((await client.waitForFinal(refused.json.task_id)).status, 'failed');
      await receiver.waitFor(1);

      const delta = (samples: Map<string, number>, name: string, labels: Record<string, string>) => sampleSum(samples, name, labels) - sampleSum(before, name, labels);
      const after = await scrapeUntil(stack.baseUrl, (samples) => delta(samples, 'framegate_webhook_attempts_total', { outcome: 'delivered' }) >= 1);
      const transitions = (state: string) => delta(after, 'framegate_video_task_transitions_total', { state, model: 'seedance-2.0' });
      assert.deepEqual(
        { submitted: transitions('submitted'), running: transitions('running'), succeeded: transitions('succeeded'), failed: transitions('failed') },
        { submitted: 2, running: 1, succeeded: 1, failed: 1 },
        'the refused task never ran',
      );
      assert.equal(delta(after, 'framegate_webhook_attempts_total', { outcome: 'delivered' }), 1);
      assert.equal(delta(after, 'framegate_vendor_errors_total', { vendor: 'simulator-seedance', kind: 'rejected' }), 1);
      // 5 s of 720p on seedance-2.0 (config/catalog.local.json): 5 × 80,000 micro-USD; the refusal is free.
      assert.equal(delta(after, 'framegate_spend_micro_usd_total', { kind: 'video', model: 'seedance-2.0' }), 400_000);
    } finally {
      await receiver.close();
    }
  });
});

describe('GET /metrics with METRICS_TOKEN set', () => {
  const token = 'scrape-token-0123456789';
  let api: TestApp;
  before(async () => {
    api = await startTestApp('metrics-token', { METRICS_TOKEN: token });
  });
  after(() => api.close());

  it('answers a scrape without the token, or with another, 401 in the spec\'s error body', async () => {
    for (const headers of [{}, { authorization: 'Bearer scrape-token-9876543210' }, { authorization: `Basic ${token}` }]) {
      const refused = await api.app.inject({ method: 'GET', url: '/metrics', headers });
      assert.equal(refused.statusCode, 401, JSON.stringify(headers));
      assert.equal(refused.headers['www-authenticate'], 'Bearer');
      assert.deepEqual(refused.json(), { error: { message: 'Missing or invalid metrics token (Authorization: Bearer <METRICS_TOKEN>).', type: 'authentication_error', code: 'invalid_metrics_token' } });
    }
    const scraped = await api.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } });
    assert.equal(scraped.statusCode, 200);
    assert.match(scraped.body, /# TYPE framegate_http_request_duration_seconds histogram/);
    // Probes stay open.
    assert.equal((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });

  it('refuses an address past 20 wrong tokens with 429 and Retry-After, the right token too; another address still scrapes', async () => {
    await clearOfWindowEdge(OPERATOR_TOKEN_GUESSES.windowMs, 5_000);
    const scrape = (remoteAddress: string, authorization: string) => api.app.inject({ method: 'GET', url: '/metrics', remoteAddress, headers: { authorization } });
    for (let index = 0; index < 25; index++) assert.equal((await api.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.9' })).statusCode, 401, 'no token is not counted');
    for (let index = 0; index < 20; index++) assert.equal((await scrape('203.0.113.9', `Bearer wrong-${index}-0123456789`)).statusCode, 401);
    const refused = await scrape('203.0.113.9', `Bearer ${token}`);
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.json().error.code, 'rate_limit_exceeded');
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    assert.equal((await scrape('203.0.113.10', `Bearer ${token}`)).statusCode, 200);
  });

  it('refuses a token shorter than 16 characters at start-up', () => {
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN must be at least 16 characters/);
  });
});
