import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { deliverWebhookOnce, type WebhookDeliveryInput } from '../../activities/webhook-delivery.ts';
import { parseRetryAfter } from '../../core/retry-after.ts';
import { createGuardedDispatcher, parseOutboundAllowlist } from '../../core/outbound-guard.ts';
import { generateWebhookSecret } from '../../core/webhook-signature.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// Real deliveries to real HTTP receivers on loopback, through the guarded dispatcher with the
// loopback allowlist (as in local runs), except where the test is about the guard itself.
const loopbackDispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('loopback') });
after(() => loopbackDispatcher.close());

const secret = generateWebhookSecret();
// Non-ASCII and odd spacing: a re-serialised or re-encoded body would not match byte for byte.
const body = '{"task_id":"task_abc","status":"succeeded",  "prompt":"café ✓ \\u00e9"}';

function attemptTo(url: string, overrides: Partial<WebhookDeliveryInput> = {}): WebhookDeliveryInput {
  return { url, webhookId: 'msg_task_abc', timestamp: Math.floor(Date.now() / 1000), body, secrets: [secret], dispatcher: loopbackDispatcher, ...overrides };
}

describe('deliverWebhookOnce', () => {
  it('delivers on 200: body byte for byte, signed, with our content type and user agent', async () => {
    const receiver = await startWebhookReceiver([200]);
    try {
      const result = await deliverWebhookOnce(attemptTo(receiver.url));
      assert.equal(result.outcome, 'delivered');
      assert.equal(result.status, 200);
      assert.equal(result.error, undefined);
      assert.ok(result.durationMs >= 0);
      const [received] = receiver.received;
      assert.ok(received);
      assert.equal(received.body, body);
      assert.equal(received.headers['content-type'], 'application/json');
      assert.equal(received.headers['user-agent'], 'Framegate-Webhooks/1');
      assert.equal(received.headers['webhook-id'], 'msg_task_abc');
      const headers = Object.fromEntries(Object.entries(received.headers).map(([name, value]) => [name, String(value)]));
      assert.deepEqual(new Webhook(secret).verify(received.body, headers), JSON.parse(body));
    } finally {
      await receiver.close();
    }
  });

  it('is a retry with the status on 500', async () => {
    const receiver = await startWebhookReceiver([500]);
    try {
      const result = await deliverWebhookOnce(attemptTo(receiver.url));
      assert.equal(result.outcome, 'retry');
      assert.equal(result.status, 500);
      assert.match(result.error ?? '', /HTTP 500/);
      assert.equal(result.retryAfterMs, undefined);
    } finally {
      await receiver.close();
    }
  });

  it('is gone on 410', async () => {
    const receiver = await startWebhookReceiver([410]);
    try {
      const result = await deliverWebhookOnce(attemptTo(receiver.url));
      assert.equal(result.outcome, 'gone');
      assert.equal(result.status, 410);
    } finally {
      await receiver.close();
    }
  });

  it('does not follow a 302: a retry naming the redirect, and the target gets nothing', async () => {
    const receiver = await startWebhookReceiver([{ status: 302, headers: { location: '/internal' } }]);
    try {
      const result = await deliverWebhookOnce(attemptTo(receiver.url));
      assert.equal(result.outcome, 'retry');
      assert.equal(result.status, 302);
      assert.match(result.error ?? '', /302 redirect to \/internal; redirects are not followed/);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(receiver.received.map((webhook) => webhook.body), [body]);
    } finally {
      await receiver.close();
    }
  });

  it('turns Retry-After: 120 into retryAfterMs 120000', async () => {
    const receiver = await startWebhookReceiver([{ status: 503, headers: { 'retry-after': '120' } }]);
    try {
      const result = await deliverWebhookOnce(attemptTo(receiver.url));
      assert.equal(result.outcome, 'retry');
      assert.equal(result.status, 503);
      assert.equal(result.retryAfterMs, 120_000);
    } finally {
      await receiver.close();
    }
  });

  it('reads Retry-After as seconds or an HTTP date, and ignores nonsense', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    assert.equal(parseRetryAfter('0', now), 0);
    assert.equal(parseRetryAfter(' 7 ', now), 7000);
    assert.equal(parseRetryAfter('Tue, 01 Jan 2030 00:01:30 GMT', now), 90_000);
    assert.equal(parseRetryAfter('Mon, 31 Dec 2029 23:00:00 GMT', now), 0);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter('-5', now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });

  it('is a retry with a timeout error when the receiver never answers', async () => {
    const requests: IncomingMessage[] = [];
    const silent = createServer((request) => void requests.push(request));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hooks`;
      const startedAt = Date.now();
      const result = await deliverWebhookOnce(attemptTo(url, { timeoutMs: 200 }));
      assert.equal(result.outcome, 'retry');
      assert.equal(result.status, undefined);
      assert.match(result.error ?? '', /timeout/);
      assert.ok(Date.now() - startedAt < 2000, 'gave up near the timeout');
      assert.ok(result.durationMs >= 150, `durationMs ${result.durationMs}`);
      assert.equal(requests.length, 1, 'the request did reach the receiver');
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('is a retry naming the error when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const result = await deliverWebhookOnce(attemptTo(`http://127.0.0.1:${port}/hooks`));
    assert.equal(result.outcome, 'retry');
    assert.match(result.error ?? '', /ECONNREFUSED/);
  });

  it('is refused when the destination is forbidden: the caller reads why, the log also where it resolved and how to allow it', async () => {
    const receiver = await startWebhookReceiver([200]);
    const guarded = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('') });
    try {
      const result = await deliverWebhookOnce(attemptTo(receiver.url.replace('127.0.0.1', 'localhost'), { dispatcher: guarded }));
      assert.equal(result.outcome, 'refused');
      assert.equal(result.status, undefined);
      assert.equal(result.error, 'refused: localhost is a loopback address, which the gateway does not call');
      assert.match(result.detail ?? '', /localhost at (127\.0\.0\.1|::1)/);
      assert.match(result.detail ?? '', /OUTBOUND_ALLOWLIST/);
      assert.equal(receiver.received.length, 0);
    } finally {
      await guarded.close();
      await receiver.close();
    }
  });

  it('refuses a URL that can never work without sending anything', async () => {
    for (const url of ['ftp://127.0.0.1/hooks', 'http://user:secret@127.0.0.1/hooks', 'not a url']) {
      const result = await deliverWebhookOnce(attemptTo(url));
      assert.equal(result.outcome, 'refused', url);
      assert.match(result.error ?? '', /invalid callback URL/, url);
    }
  });
});
