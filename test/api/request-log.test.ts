import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { hashApiKey } from '../../core/api-keys.ts';
import { keyIdForHash } from '../../store/api-keys.ts';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// The log: one line per request, carrying its id, route, status and key id; and never a
// secret, whatever the caller sent (valid and invalid keys, the admin token, a bad token).

describe('request log', () => {
  let harness: TestApp;
  const lines: Array<Record<string, unknown>> = [];
  const raw: string[] = [];
  before(async () => {
    harness = await startTestApp('request-log', { LOG_LEVEL: 'debug' }, {
      logStream: {
        write(line: string) {
          raw.push(line);
          lines.push(JSON.parse(line) as Record<string, unknown>);
        },
      },
    });
  });
  after(() => harness.close());

  it('writes one line per request with its id, route, status and key, and no secret', async () => {
    const account = await createAccount(harness.app, { name: 'logged', balance_usd: 1 });
    const { key, id: keyId } = await createKey(harness.app, account.id);
    const wrongKey = `${key.slice(0, -4)}AAAA`;
    lines.length = 0;
    raw.length = 0;

    const models = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    assert.equal(models.statusCode, 200);
    const refused = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(wrongKey) });
    assert.equal(refused.statusCode, 401);
    const admin = await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders });
    assert.equal(admin.statusCode, 200);
    const badAdmin = await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}x` } });
    assert.equal(badAdmin.statusCode, 401);

    const completed = lines.filter((line) => line.msg === 'request completed');
    assert.equal(completed.length, 4);
    assert.deepEqual(
      completed.map((line) => [line.route, line.status]),
      [['/v1/models', 200], ['/v1/models', 401], ['/admin/accounts/:id', 200], ['/admin/accounts/:id', 401]],
    );
    assert.equal(completed[0]!.key, keyId);
    assert.equal(completed[0]!.reqId, models.headers['x-request-id']);
    assert.equal(completed[1]!.key, undefined);

    const everything = raw.join('');
    for (const secret of [key, wrongKey, TEST_ADMIN_TOKEN, key.slice(3)]) assert.ok(!everything.includes(secret), 'a secret reached the log');
  });

  it('writes the query parameters the gateway reads, and masks the values of others (a key put in the URL)', async () => {
    const account = await createAccount(harness.app, { name: 'key in the url', balance_usd: 1 });
    const { key } = await createKey(harness.app, account.id);
    raw.length = 0;
    lines.length = 0;
    await harness.app.inject({ method: 'GET', url: `/v1/video/generations?limit=5&api_key=${key}&status=running`, headers: bearer(key) });
    await harness.app.inject({ method: 'GET', url: `/v1/nothing?token=${encodeURIComponent(TEST_ADMIN_TOKEN)}` });
    await harness.app.inject({ method: 'GET', url: `/v1/models?key=${key}` });
    await harness.app.inject({ method: 'GET', url: `/v1/models?${key}` });
    const urls = lines.filter((line) => line.msg === 'request completed').map((line) => line.url);
    assert.deepEqual(urls, ['/v1/video/generations?limit=5&[redacted]&status=running', '/v1/nothing?[redacted]', '/v1/models?key=[redacted]', '/v1/models?[redacted]']);
    const everything = raw.join('');
    for (const secret of [key, TEST_ADMIN_TOKEN, encodeURIComponent(TEST_ADMIN_TOKEN)]) assert.ok(!everything.includes(secret), 'a secret reached the log');
  });
});

describe('request log of calls whose caller left', () => {
  let stack: SimulatorStack;
  const lines: Array<Record<string, unknown>> = [];
  before(async () => {
    stack = await startOpenAiStack('request-log-left', { LOG_LEVEL: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  });
  after(() => stack.close());

  it('writes one line with status 499 for a chat call, a stream and an image call abandoned by their callers', async () => {
    const caller = await stack.newCaller('leaver');
    const client = stack.client(caller.key);
    const leave = async (call: (signal: AbortSignal) => Promise<unknown>, afterMs: number) => {
      const controller = new AbortController();
      const running = call(controller.signal);
      setTimeout(() => controller.abort(), afterMs);
      await assert.rejects(running, OpenAI.APIUserAbortError);
    };
    await leave((signal) => client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'take your time [sim:delay_ms=2000]' }] }, { signal }), 300);
    await leave(async (signal) => {
      const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'a long story [sim:slow]' }] }, { signal });
      for await (const chunk of stream) void chunk;
      // The SDK ends the iteration quietly once aborted.
      throw new OpenAI.APIUserAbortError();
    }, 300);
    // Carried on after its caller left, and charged: its line comes when it ends.
    await leave((signal) => client.images.generate({ model: 'gpt-image-1', prompt: 'a kite [sim:delay_ms=1000]' }, { signal }), 300);
    await waitUntil(() => lines.filter((line) => line.msg === 'request abandoned by its caller').length === 3, 5_000);
    const left = lines.filter((line) => line.msg === 'request abandoned by its caller');
    const keyId = keyIdForHash(hashApiKey(caller.key));
    assert.deepEqual(left.map((line) => [line.route, line.status, line.key]), [
      ['/v1/chat/completions', 499, keyId],
      ['/v1/chat/completions', 499, keyId],
      ['/v1/images/generations', 499, keyId],
    ]);
    assert.ok(left.every((line) => typeof line.reqId === 'string' && typeof line.ms === 'number'));
  });
});
