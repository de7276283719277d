import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { generateWebhookSecret, signWebhook } from '../../core/webhook-signature.ts';

// The verifier is the independent standardwebhooks package, the library a receiver would use.
const body = JSON.stringify({ task_id: 'task_abc', status: 'succeeded', note: 'héllo ✓' });
const now = () => Math.floor(Date.now() / 1000);

describe('signWebhook', () => {
  it('produces headers the standardwebhooks verifier accepts', () => {
    const secret = generateWebhookSecret();
    const headers = signWebhook({ secret, webhookId: 'msg_task_abc', timestamp: now(), body });
    assert.equal(headers['webhook-id'], 'msg_task_abc');
    assert.match(headers['webhook-timestamp'], /^\d+$/);
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(new Webhook(secret).verify(body, { ...headers }), JSON.parse(body));
  });

  it('matches the reference implementation byte for byte', () => {
    const secret = generateWebhookSecret();
    const timestamp = now();
    const ours = signWebhook({ secret, webhookId: 'msg_1', timestamp, body })['webhook-signature'];
    assert.equal(ours, new Webhook(secret).sign('msg_1', new Date(timestamp * 1000), body));
  });

  it('fails verification when the body, id or timestamp is tampered with', () => {
    const secret = generateWebhookSecret();
    const headers = signWebhook({ secret, webhookId: 'msg_task_abc', timestamp: now(), body });
    const verifier = new Webhook(secret);
    assert.throws(() => verifier.verify(body.replace('succeeded', 'failed'), { ...headers }), /No matching signature/);
    assert.throws(() => verifier.verify(`${body} `, { ...headers }), /No matching signature/);
    assert.throws(() => verifier.verify(body, { ...headers, 'webhook-id': 'msg_other' }), /No matching signature/);
    assert.throws(() => verifier.verify(body, { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) - 1) }), /No matching signature/);
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(body, { ...headers }), /No matching signature/);
  });

  it('signs once per secret during a rotation, and each secret verifies on its own', () => {
    const oldSecret = generateWebhookSecret();
    const newSecret = generateWebhookSecret();
    const headers = signWebhook({ secret: [oldSecret, newSecret], webhookId: 'msg_rotation', timestamp: now(), body });
    const signatures = headers['webhook-signature'].split(' ');
    assert.equal(signatures.length, 2);
    assert.notEqual(signatures[0], signatures[1]);
    for (const secret of [oldSecret, newSecret]) {
      assert.deepEqual(new Webhook(secret).verify(body, { ...headers }), JSON.parse(body));
    }
    // Each signature alone is the one the matching secret alone would produce.
    assert.equal(signatures[0], signWebhook({ secret: oldSecret, webhookId: 'msg_rotation', timestamp: Number(headers['webhook-timestamp']), body })['webhook-signature']);
  });

  it('refuses malformed secrets and timestamps instead of signing with a wrong key', () => {
    const base = { webhookId: 'msg_1', timestamp: now(), body };
    assert.throws(() => signWebhook({ ...base, secret: 'whsec_not base64!' }), /base64/);
    assert.throws(() => signWebhook({ ...base, secret: 'whsec_' }), /base64/);
    assert.throws(() => signWebhook({ ...base, secret: [] }), /at least one secret/);
    assert.throws(() => signWebhook({ ...base, secret: generateWebhookSecret(), timestamp: 1.5 }), /Unix seconds/);
    assert.throws(() => signWebhook({ ...base, secret: generateWebhookSecret(), webhookId: '' }), /empty/);
  });
});

describe('generateWebhookSecret', () => {
  it('is whsec_ plus base64 of 32 random bytes, different every time', () => {
    const first = generateWebhookSecret();
    assert.match(first, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(first.slice('whsec_'.length), 'base64').length, 32);
    assert.notEqual(first, generateWebhookSecret());
  });
});
