import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';

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
