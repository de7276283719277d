import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { READS_PER_WINDOW, WINDOW_MS } from '../../api/plugins/unknown-key-throttle.ts';
import { generateApiKey } from '../../core/api-keys.ts';
import { OPERATOR_TOKEN_GUESSES } from '../../core/failures-by-address.ts';
import { clearOfWindowEdge } from '../helpers/window-edge.ts';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';

describe('API key authentication on /v1', () => {
  let harness: TestApp;
  let validKey: string;

  before(async () => {
    harness = await startTestApp('auth');
    const account = await createAccount(harness.app, { name: 'auth', balance_usd: 1 });
    validKey = (await createKey(harness.app, account.id)).key;
  });
  after(() => harness.close());

  const refused: Array<[string, Record<string, string>]> = [
    ['no Authorization header', {}],
    ['a Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['Bearer without a token', { authorization: 'Bearer' }],
    ['a token that is not a key', { authorization: 'Bearer sk-not-ours' }],
    ['a key with a broken checksum', { authorization: `Bearer ${generateApiKey().plaintext.slice(0, -1)}0` }],
    ['a well-formed key that was never issued', bearer(generateApiKey().plaintext)],
    ['the admin token', { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }],
  ];
  for (const [label, headers] of refused) {
    it(`refuses ${label} with 401 authentication_error`, async () => {
      const response = await harness.app.inject({ method: 'GET', url: '/v1/models', headers });
      assert.equal(response.statusCode, 401);
      const body = response.json();
      assert.equal(body.error.type, 'authentication_error');
      assert.equal(body.error.code, 'invalid_api_key');
      assert.match(body.error.message, /API key|Authorization/);
    });
  }

  it('accepts a valid key, case-insensitive scheme included', async () => {
    for (const scheme of ['Bearer', 'bearer']) {
      const response = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: `${scheme} ${validKey}` } });
      assert.equal(response.statusCode, 200, response.body);
    }
  });

  it('answers an address that keeps sending unknown keys from the cache alone: 429 once its reads are used up', async () => {
    await clearOfWindowEdge(WINDOW_MS, 2_000);
    const get = (key: string, remoteAddress: string) => harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key), remoteAddress });
    const address = '203.0.113.7';
    assert.equal((await get(validKey, address)).statusCode, 200, 'the valid key is cached');
    const statuses: number[] = [];
    let refusal: Awaited<ReturnType<typeof get>> | undefined;
    for (let index = 0; index < READS_PER_WINDOW + 10; index++) {
      const answer = await get(generateApiKey().plaintext, address);
      statuses.push(answer.statusCode);
      if (answer.statusCode === 429) refusal = answer;
    }
    assert.deepEqual(statuses, [...Array(READS_PER_WINDOW).fill(401), ...Array(10).fill(429)]);
    assert.equal(refusal!.json().error.code, 'rate_limit_exceeded');
    assert.match(refusal!.json().error.message, /^Too many requests from this address with API keys this server has not seen lately; retry in \d+ s/);
    assert.ok(Number(refusal!.headers['retry-after']) >= 1 && Number(refusal!.headers['retry-after']) <= 10);
    // A key in use still passes from that address; an unknown key from another is still read.
    assert.equal((await get(validKey, address)).statusCode, 200);
    assert.equal((await get(generateApiKey().plaintext, '198.51.100.9')).statusCode, 401);
    // Sent all at once, before any read came back, they are held to the same count.
    const together = await Promise.all(Array.from({ length: READS_PER_WINDOW + 10 }, () => get(generateApiKey().plaintext, '198.51.100.10')));
    const counted = together.map((answer) => answer.statusCode).sort();
    assert.deepEqual(counted, [...Array(READS_PER_WINDOW).fill(401), ...Array(10).fill(429)]);
  });

  it('reads a key that many requests bring at once only once: a burst with a new key (or after a restart) is not taken for guessing', async () => {
    await clearOfWindowEdge(WINDOW_MS, 2_000);
    const account = await createAccount(harness.app, { name: 'auth-burst', balance_usd: 1 });
    const fresh = (await createKey(harness.app, account.id)).key;
    const get = (key: string) => harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key), remoteAddress: '198.51.100.20' });
    // A hands-on review: 120 at once with a key just created, 90 answered 429 "API keys this
    // server has not seen lately": every one had read the key, and counted as a possible miss.
    const burst = await Promise.all(Array.from({ length: READS_PER_WINDOW * 3 }, () => get(fresh)));
    assert.deepEqual(burst.map((answer) => answer.statusCode), Array(READS_PER_WINDOW * 3).fill(200));
    // An unknown key sent that many times at once is read once too, and counts once.
    const guessed = generateApiKey().plaintext;
    const unknown = await Promise.all(Array.from({ length: READS_PER_WINDOW * 2 }, () => get(guessed)));
    assert.deepEqual(unknown.map((answer) => answer.statusCode), Array(READS_PER_WINDOW * 2).fill(401));
    const afterwards: number[] = [];
    for (let index = 0; index < READS_PER_WINDOW; index++) afterwards.push((await get(generateApiKey().plaintext)).statusCode);
    assert.deepEqual(afterwards, [...Array(READS_PER_WINDOW - 1).fill(401), 429], 'the address had used one read of its window');
  });

  it('refuses a request with two Authorization headers with 400, whichever comes first', async () => {
    // Node keeps the first and drops the rest; a proxy in front may read the last.
    await harness.app.listen({ host: '127.0.0.1', port: 0 });
    const origin = `http://127.0.0.1:${(harness.app.server.address() as AddressInfo).port}`;
    const wrong = `Bearer ${generateApiKey().plaintext}`;
    for (const [path, right] of [['/v1/models', `Bearer ${validKey}`], ['/admin/accounts/acct_none', `Bearer ${TEST_ADMIN_TOKEN}`]]) {
      for (const pair of [[right, wrong], [wrong, right], [right, right]]) {
        const response = await request(`${origin}${path}`, { headers: ['authorization', pair[0]!, 'Authorization', pair[1]!] });
        const body = (await response.body.json()) as { error: { code: string; message: string } };
        assert.equal(response.statusCode, 400, `${path}: ${JSON.stringify(body)}`);
        assert.deepEqual([body.error.code, body.error.message], ['invalid_request', 'The request carries several Authorization headers; send exactly one.']);
      }
    }
  });

  it('refuses a revoked key at once', async () => {
    const account = await createAccount(harness.app, { name: 'revoking' });
    const created = await createKey(harness.app, account.id);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(created.key) })).statusCode, 200);
    const revoked = await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: adminHeaders });
    assert.equal(revoked.statusCode, 200);
    const after = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(created.key) });
    assert.equal(after.statusCode, 401);
    assert.equal(after.json().error.type, 'authentication_error');
  });

  it('records last_used_at for a key that was used', async () => {
    const account = await createAccount(harness.app, { name: 'last-used' });
    const created = await createKey(harness.app, account.id);
    const before = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
    assert.equal(before.keys[0].last_used_at, null);
    await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(created.key) });
    // The write is fire-and-forget; give it a moment to land.
    let lastUsed: string | null = null;
    for (let attempt = 0; attempt < 50 && !lastUsed; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      lastUsed = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json().keys[0].last_used_at;
    }
    assert.ok(lastUsed && Date.parse(lastUsed) > Date.now() - 60_000, `last_used_at is ${lastUsed}`);
  });
});

describe('admin token on /admin', () => {
  let harness: TestApp;
  before(async () => {
    harness = await startTestApp('admin-auth');
  });
  after(() => harness.close());

  it('refuses a missing, wrong or API-key token with 401', async () => {
    const account = await createAccount(harness.app, { name: 'x' });
    const apiKey = (await createKey(harness.app, account.id)).key;
    for (const headers of [{}, { authorization: 'Bearer wrong-token-wrong-token' }, bearer(apiKey), { authorization: TEST_ADMIN_TOKEN }]) {
      const response = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers, payload: { name: 'nope' } });
      assert.equal(response.statusCode, 401);
      assert.equal(response.json().error.type, 'authentication_error');
    }
  });

  it('refuses an address past 20 wrong tokens in its window with 429, the right token too, while other addresses and right tokens are not counted', async () => {
    await clearOfWindowEdge(OPERATOR_TOKEN_GUESSES.windowMs, 5_000);
    const guesser = '198.51.100.7';
    const operator = '198.51.100.8';
    const call = (remoteAddress: string, authorization: string) =>
      harness.app.inject({ method: 'GET', url: '/admin/accounts/acct_none', remoteAddress, headers: { authorization } });
    // Right tokens cost nothing: 30 of them leave the operator's 20 guesses whole. Nor do
    // requests without a token (a probe, a browser), which guess nothing: counted, anyone behind
    // the operator's proxy could lock the operator out.
    for (let index = 0; index < 30; index++) assert.equal((await call(operator, `Bearer ${TEST_ADMIN_TOKEN}`)).statusCode, 404);
    for (let index = 0; index < 30; index++) {
      assert.equal((await harness.app.inject({ method: 'GET', url: '/admin/accounts/acct_none', remoteAddress: operator })).statusCode, 401);
    }
    const guesses = await Promise.all(Array.from({ length: 25 }, (_, index) => call(guesser, `Bearer wrong-token-${index}-padding`)));
    assert.deepEqual(
      guesses.map((response) => response.statusCode).sort(),
      [...Array<number>(20).fill(401), ...Array<number>(5).fill(429)],
      'sent at once, 20 are compared and the rest refused',
    );
    const refused = await call(guesser, `Bearer ${TEST_ADMIN_TOKEN}`);
    assert.equal(refused.statusCode, 429, 'past its guesses, an address learns nothing from a right one');
    assert.equal(refused.json().error.code, 'rate_limit_exceeded');
    assert.match(refused.json().error.message, /wrong admin tokens/);
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 600, `Retry-After ${refused.headers['retry-after']}`);
    for (let index = 0; index < 19; index++) assert.equal((await call(operator, `Bearer wrong-token-${index}-padding`)).statusCode, 401);
    assert.equal((await call(operator, `Bearer ${TEST_ADMIN_TOKEN}`)).statusCode, 404, 'another address keeps its own count');
  });

  it('answers 503 with an actionable message when ADMIN_TOKEN is not configured', async () => {
    const logLines: Array<Record<string, any>> = [];
    const unconfigured = await startTestApp('admin-off', { ADMIN_TOKEN: undefined as unknown as string, LOG_LEVEL: 'info' }, { logStream: { write: (line) => void logLines.push(JSON.parse(line)) } });
    try {
      const response = await unconfigured.app.inject({ method: 'GET', url: '/admin/accounts/acct_x', headers: adminHeaders });
      assert.equal(response.statusCode, 503);
      assert.match(response.json().error.message, /ADMIN_TOKEN/);
      // A refusal the gateway chose is no bug: a short warning, not an error with a stack trace.
      const refusal = logLines.find((line) => line.msg === 'request refused as unavailable');
      assert.deepEqual([refusal?.level, refusal?.code, refusal?.err], [40, 'service_unavailable', undefined]);
      assert.deepEqual(logLines.filter((line) => line.level >= 50), []);
    } finally {
      await unconfigured.close();
    }
  });
});
