import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { hashApiKey, isWellFormedApiKey } from '../../core/api-keys.ts';
import { accountIdFor } from '../../api/services/account-onboarding.ts';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';

describe('admin API', () => {
  let harness: TestApp;
  before(async () => {
    harness = await startTestApp('admin');
  });
  after(() => harness.close());

  const post = (url: string, payload: unknown) => harness.app.inject({ method: 'POST', url, headers: adminHeaders, payload: payload as object });

  it('creates an account with a micro-exact balance and a whsec_ webhook secret', async () => {
    const response = await post('/admin/accounts', { name: 'Acme', balance_usd: 12.345678 });
    assert.equal(response.statusCode, 201);
    const account = response.json();
    assert.match(account.id, /^acct_/);
    assert.equal(account.name, 'Acme');
    assert.equal(account.balance_usd, 12.345678);
    assert.ok(!Number.isNaN(Date.parse(account.created_at)));
    assert.match(account.webhook_secret, /^whsec_[A-Za-z0-9+/=]+$/);
    assert.ok(Buffer.from(account.webhook_secret.slice(6), 'base64').length >= 24);
    const latest = await harness.database.db.collection('ledger').find({ account_id: account.id }).sort({ seq: -1 }).limit(1).next();
    assert.equal(latest?.balance_micros, 12_345_678);
    assert.ok(Number.isInteger(latest?.balance_micros));
  });

  it('lists accounts newest first, a page at a time, with what each can spend', async () => {
    const names = ['List A', 'List B', 'List C'];
    const created = [];
    for (const name of names) created.push((await post('/admin/accounts', { name, balance_usd: 1 })).json());
    const list = (query: string) => harness.app.inject({ method: 'GET', url: `/admin/accounts${query}`, headers: adminHeaders });
    const first = await list('?limit=2');
    assert.equal(first.statusCode, 200);
    const page = first.json();
    assert.equal(page.object, 'list');
    assert.deepEqual(page.data.map((account: { id: string }) => account.id), [created[2].id, created[1].id]);
    assert.deepEqual(Object.keys(page.data[0]).sort(), ['available_usd', 'balance_usd', 'created_at', 'held_usd', 'id', 'name', 'spent_usd', 'webhook_secret']);
    assert.equal(page.data[0].available_usd, 1);
    assert.deepEqual([page.first_id, page.last_id, page.has_more], [created[2].id, created[1].id, true]);
    const next = (await list(`?limit=2&after=${page.last_id}`)).json();
    assert.equal(next.data[0].id, created[0].id);
    // Every account once, following the pages to the end.
    const seen: string[] = [];
    for (let after = ''; ; ) {
      const body = (await list(`?limit=100${after ? `&after=${after}` : ''}`)).json();
      seen.push(...body.data.map((account: { id: string }) => account.id));
      if (!body.has_more) break;
      after = body.last_id;
    }
    assert.equal(new Set(seen).size, seen.length);
    assert.equal(seen.length, await harness.database.db.collection('accounts').countDocuments({}));
    for (const [query, status, param] of [['?after=acct_nobody', 404, 'after'], [`?after=${'x'.repeat(101)}`, 404, 'after'], ['?limit=0', 400, 'limit'], ['?limit=1e1', 400, 'limit'], ['?limit=', 400, 'limit'], ['?state=new', 400, 'state']] as const) {
      const refused = await list(query);
      assert.equal(refused.statusCode, status, query);
      assert.equal(refused.json().error.param, param, query);
    }
    assert.equal((await harness.app.inject({ method: 'GET', url: '/admin/accounts' })).statusCode, 401);
  });

  it('defaults the balance to zero', async () => {
    const response = await post('/admin/accounts', { name: 'Zero' });
    assert.equal(response.json().balance_usd, 0);
  });

  it('reads null in an optional field as left out, as /v1 does', async () => {
    const account = await post('/admin/accounts', { name: 'Nulls', balance_usd: null });
    assert.equal(account.statusCode, 201, account.body);
    assert.equal(account.json().balance_usd, 0);
    const key = await post(`/admin/accounts/${account.json().id}/keys`, { name: 'all models', models: null });
    assert.equal(key.statusCode, 201, key.body);
    assert.equal(key.json().models, null);
  });

  const badAccounts: Array<[string, unknown, string]> = [
    ['seven decimals', { name: 'a', balance_usd: 1.0000001 }, 'balance_usd'],
    ['a negative balance', { name: 'a', balance_usd: -1 }, 'balance_usd'],
    ['a balance given as a string', { name: 'a', balance_usd: '5' }, 'balance_usd'],
    ['a missing name', { balance_usd: 1 }, 'name'],
    ['an empty name', { name: '  ' }, 'name'],
    ['a name on two lines', { name: 'line1\nline2' }, 'name'],
    ['a name with a NUL', { name: 'ab\u0000cd' }, 'name'],
    ['a name with a direction override', { name: 'fg-prod\u202Eved' }, 'name'],
    // Stored as UTF-8, half a pair would come back as U+FFFD: not the name that was answered.
    ['a name with half a surrogate pair', { name: '\ud800x' }, 'name'],
    ['a name with the other half alone', { name: 'x\udfff' }, 'name'],
    // Checked as sent, as the document's pattern reads it: a trailing line break is refused too.
    ['a name ending in a line break', { name: 'Acme\n' }, 'name'],
  ];
  it('says what a USD amount must be, in its own words', async () => {
    const asText = await post('/admin/accounts', { name: 'a', balance_usd: '5' });
    assert.match(asText.json().error.message, /balance_usd.*must be a number of USD, like 12\.5/);
    assert.doesNotMatch(asText.json().error.message, /expected number/);
  });

  for (const [label, payload, field] of badAccounts) {
    it(`refuses an account with ${label} (400 naming ${field})`, async () => {
      const response = await post('/admin/accounts', payload);
      assert.equal(response.statusCode, 400);
      const body = response.json();
      assert.equal(body.error.type, 'invalid_request_error');
      assert.equal(body.error.param, field);
      assert.match(body.error.message, new RegExp(field));
    });
  }

  it('adds credits exactly, refuses non-positive or over-precise amounts, 404s unknown accounts', async () => {
    const account = await createAccount(harness.app, { name: 'Credits', balance_usd: 0.1 });
    const credited = await post(`/admin/accounts/${account.id}/credits`, { amount_usd: 0.2 });
    assert.equal(credited.statusCode, 200);
    assert.equal(credited.json().balance_usd, 0.3); // 0.1 + 0.2 in micros, not 0.30000000000000004
    for (const amount of [0, -5, 0.0000001]) {
      const refused = await post(`/admin/accounts/${account.id}/credits`, { amount_usd: amount });
      assert.equal(refused.statusCode, 400, `amount ${amount}`);
      assert.equal(refused.json().error.param, 'amount_usd');
    }
    const missing = await post('/admin/accounts/acct_missing/credits', { amount_usd: 1 });
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().error.type, 'not_found_error');
  });

  it('takes credits back from the free balance only, not as spending, and refuses more than is free', async () => {
    const account = await createAccount(harness.app, { name: 'Deductions', balance_usd: 1 });
    const key = (await createKey(harness.app, account.id)).key;
    // A task holds $0.40 (seedance-2.0, 5 s at 720p); no worker runs it here, so the hold stays.
    const task = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'seedance-2.0', prompt: 'x', seconds: '5', metadata: { resolution: '720p' } } });
    assert.equal(task.statusCode, 200, task.body);

    const refused = await post(`/admin/accounts/${account.id}/deductions`, { amount_usd: 0.7 });
    assert.equal(refused.statusCode, 409, refused.body);
    assert.equal(refused.json().error.param, 'amount_usd');
    assert.match(refused.json().error.message, /free balance is \$0\.600000, and \$0\.400000 is held .* Nothing was taken/);
    const taken = await post(`/admin/accounts/${account.id}/deductions`, { amount_usd: 0.25 });
    assert.equal(taken.statusCode, 200, taken.body);
    assert.deepEqual([taken.json().balance_usd, taken.json().held_usd, taken.json().spent_usd], [0.35, 0.4, 0]);
    for (const amount of [0, -5, 0.0000001]) {
      assert.equal((await post(`/admin/accounts/${account.id}/deductions`, { amount_usd: amount })).statusCode, 400, `amount ${amount}`);
    }
    assert.equal((await post('/admin/accounts/acct_missing/deductions', { amount_usd: 1 })).statusCode, 404);
    await harness.temporal.client.workflow.getHandle(task.json().task_id).terminate('test cleanup');
  });

  it('keeps an account at most $1,000,000,000, so its money stays exact to the micro-dollar', async () => {
    const account = await createAccount(harness.app, { name: 'Rich', balance_usd: 999_999_999 });
    const credit = (amount: number) => post(`/admin/accounts/${account.id}/credits`, { amount_usd: amount });
    assert.equal((await credit(0.999999)).statusCode, 200);
    const refused = await credit(0.000002);
    assert.equal(refused.statusCode, 409, refused.body);
    assert.deepEqual([refused.json().error.code, refused.json().error.param], ['conflict', 'amount_usd']);
    assert.match(refused.json().error.message, /holds \$999999999\.999999 .* at most \$1000000000\.000000\. Nothing was added\./);
    assert.equal((await credit(0.000001)).json().balance_usd, 1_000_000_000);
    assert.equal((await credit(1_000_000_000)).statusCode, 409);
    const after = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
    assert.equal(after.balance_usd, 1_000_000_000);
  });

  it('moves money once per Idempotency-Key, so a retried credit or deduction is not applied twice', async () => {
    const account = await createAccount(harness.app, { name: 'Retried', balance_usd: 1 });
    const send = (path: string, amount: number, key: string) =>
      harness.app.inject({ method: 'POST', url: `/admin/accounts/${account.id}/${path}`, headers: { ...adminHeaders, 'idempotency-key': key }, payload: { amount_usd: amount } });
    for (let attempt = 0; attempt < 2; attempt++) assert.equal((await send('credits', 2, 'credit-2024-001')).statusCode, 200);
    for (let attempt = 0; attempt < 2; attempt++) assert.equal((await send('deductions', 0.5, 'deduct-2024-001')).statusCode, 200);
    const after = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
    assert.equal(after.balance_usd, 2.5);
    const reused = await send('credits', 3, 'credit-2024-001');
    assert.equal(reused.statusCode, 422);
    assert.deepEqual([reused.json().error.code, reused.json().error.param], ['idempotency_mismatch', 'Idempotency-Key']);
    assert.equal((await send('deductions', 0.7, 'deduct-2024-001')).statusCode, 422);
    // Sent at once with different amounts, both pass the check before moving: the money moves
    // once, and the request whose amount did not move is told so.
    const moved: Record<string, number> = {};
    for (const path of ['credits', 'deductions']) {
      const amounts = [0.25, 0.5];
      const answers = await Promise.all(amounts.map((amount) => send(path, amount, `race-${path}`)));
      assert.deepEqual(answers.map((answer) => answer.statusCode).sort(), [200, 422], `${path}: ${answers.map((answer) => answer.body).join(' ')}`);
      moved[path] = amounts[answers.findIndex((answer) => answer.statusCode === 200)]!;
    }
    const raced = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
    assert.equal(raced.balance_usd, 2.5 + moved.credits! - moved.deductions!, 'the amounts of the requests answered 200, and only those');
    // Keys are per account: another account's same key is another movement.
    const other = await createAccount(harness.app, { name: 'Other retried' });
    assert.equal((await harness.app.inject({ method: 'POST', url: `/admin/accounts/${other.id}/credits`, headers: { ...adminHeaders, 'idempotency-key': 'credit-2024-001' }, payload: { amount_usd: 1 } })).json().balance_usd, 1);
  });

  it('creates an account once per Idempotency-Key: a retry gets the same account, another request under the key a 422', async () => {
    const key = `onboard-${Date.now()}`;
    const create = (payload: object, idempotencyKey = key) => harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { ...adminHeaders, 'idempotency-key': idempotencyKey }, payload });
    const email = `once-${Date.now()}@example.com`;
    const body = { name: 'Once Ltd', balance_usd: 2.5, console_email: email, console_password: 'a long enough console password' };
    const first = await create(body);
    assert.equal(first.statusCode, 201, first.body);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    // The retry (its password is not compared: the first one stands).
    const retried = await create({ ...body, console_password: 'another long console password' });
    assert.equal(retried.statusCode, 201, retried.body);
    assert.equal(retried.headers['idempotent-replayed'], 'true');
    assert.equal(retried.json().id, first.json().id);
    assert.equal(retried.json().webhook_secret, first.json().webhook_secret);
    assert.equal(retried.json().balance_usd, 2.5, 'the opening balance moved once');
    assert.equal(await harness.database.db.collection('accounts').countDocuments({ name: 'Once Ltd' }), 1);
    assert.equal(await harness.database.db.collection('console_credentials').countDocuments({ account_id: first.json().id }), 1);
    // Another request under the same key changes nothing.
    for (const changed of [{ ...body, name: 'Twice Ltd' }, { ...body, balance_usd: 3 }, { ...body, console_email: `other-${email}` }, { name: 'Once Ltd', balance_usd: 2.5 }]) {
      const refused = await create(changed);
      assert.deepEqual([refused.statusCode, refused.json().error.code, refused.json().error.param], [422, 'idempotency_mismatch', 'Idempotency-Key'], JSON.stringify(changed));
    }
    assert.equal(await harness.database.db.collection('console_credentials').countDocuments({ _id: `other-${email}` as never }), 0, 'the refused email was not kept');
    // Sent at once, twice: one account, both answered with it.
    const together = await Promise.all([0, 1].map(() => create({ name: 'Together', balance_usd: 1 }, `${key}-together`)));
    assert.deepEqual(together.map((answer) => answer.statusCode), [201, 201]);
    assert.equal(together[0]!.json().id, together[1]!.json().id);
    assert.equal((await harness.app.inject({ method: 'GET', url: `/admin/accounts/${together[0]!.json().id}`, headers: adminHeaders })).json().balance_usd, 1);
    // A try that died after reserving its email, before the account was made: a retry with the
    // same email makes the account with it; one with another email makes it without the dead
    // try's, which must not sign in to an account made without it.
    const leftover = async (idempotencyKey: string, leftEmail: string) =>
      harness.database.db.collection('console_credentials').insertOne({ _id: leftEmail as never, account_id: accountIdFor(idempotencyKey), password_hash: 'from a try that died', created_at: new Date(), updated_at: new Date() });
    const sameEmail = `same-${Date.now()}@example.com`;
    await leftover(`${key}-died-same`, sameEmail);
    const resumed = await create({ name: 'Resumed', console_email: sameEmail, console_password: 'a long enough console password' }, `${key}-died-same`);
    assert.equal(resumed.statusCode, 201, resumed.body);
    assert.equal(resumed.json().id, accountIdFor(`${key}-died-same`));
    const deadEmail = `dead-${Date.now()}@example.com`;
    await leftover(`${key}-died-other`, deadEmail);
    const remade = await create({ name: 'Remade', console_email: `new-${deadEmail}`, console_password: 'a long enough console password' }, `${key}-died-other`);
    assert.equal(remade.statusCode, 201, remade.body);
    const signIns = await harness.database.db.collection('console_credentials').find({ account_id: remade.json().id }).toArray();
    assert.deepEqual(signIns.map((signIn) => signIn._id), [`new-${deadEmail}`]);
    // Without a key, every request is a new account; a malformed key is a 400.
    const unkeyed = await Promise.all([0, 1].map(() => post('/admin/accounts', { name: 'No key' })));
    assert.notEqual(unkeyed[0]!.json().id, unkeyed[1]!.json().id);
    assert.equal((await create({ name: 'Bad key' }, 'tab\there')).statusCode, 400);
  });

  it('issues a key once in plaintext and stores only its SHA-256 hash', async () => {
    const account = await createAccount(harness.app, { name: 'Keys' });
    const response = await post(`/admin/accounts/${account.id}/keys`, { name: 'prod', models: ['gpt-4o-mini', 'gpt-4o-mini'] });
    assert.equal(response.statusCode, 201);
    // The plaintext is in this answer: no cache may keep it.
    assert.equal(response.headers['cache-control'], 'no-store');
    const created = response.json();
    assert.ok(isWellFormedApiKey(created.key), created.key);
    assert.match(created.key, /^fg_[0-9A-Za-z]{49}$/);
    assert.equal(created.prefix, created.key.slice(0, 8));
    assert.equal(created.last4, created.key.slice(-4));
    assert.deepEqual(created.models, ['gpt-4o-mini']);

    const stored = await harness.database.db.collection('api_keys').findOne({ _id: created.id });
    assert.equal(stored?.hash, hashApiKey(created.key));
    assert.ok(!JSON.stringify(stored).includes(created.key), 'the plaintext must not be stored');

    const shown = await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders });
    assert.equal(shown.statusCode, 200);
    assert.ok(!shown.body.includes(created.key), 'the plaintext is shown only at creation');
    const listed = shown.json().keys[0];
    assert.deepEqual(
      { id: listed.id, name: listed.name, prefix: listed.prefix, last4: listed.last4, status: listed.status },
      { id: created.id, name: 'prod', prefix: created.prefix, last4: created.last4, status: 'active' },
    );
  });

  it('refuses keys restricted to unknown models and keys for unknown accounts', async () => {
    const account = await createAccount(harness.app, { name: 'Bad keys' });
    for (const name of ['line1\nline2\u202eevil', 'tab\there', 'nul\u0000', 'isolate\u2066x\u2069', 'c1\u0085', 'half \ud83d pair']) {
      const refused = await post(`/admin/accounts/${account.id}/keys`, { name });
      assert.equal(refused.statusCode, 400, JSON.stringify(name));
      assert.deepEqual([refused.json().error.param, /control characters/.test(refused.json().error.message)], ['name', true], refused.body);
    }
    assert.equal((await post(`/admin/accounts/${account.id}/keys`, { name: 'Ünïcode ключ 🔑 production' })).statusCode, 201);
    const unknownModel = await post(`/admin/accounts/${account.id}/keys`, { name: 'k', models: ['gpt-99'] });
    assert.equal(unknownModel.statusCode, 400);
    assert.equal(unknownModel.json().error.param, 'models');
    const unknownAccount = await post('/admin/accounts/acct_nobody/keys', { name: 'k' });
    assert.equal(unknownAccount.statusCode, 404);
  });

  it('revokes a key (idempotently) and 404s an unknown key', async () => {
    const account = await createAccount(harness.app, { name: 'Revoke' });
    const created = await createKey(harness.app, account.id);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(created.key) })).statusCode, 200);
    // Its last use is noted in the background.
    const uses = harness.database.db.collection('api_key_last_use');
    for (let waited = 0; !(await uses.findOne({ _id: created.id as never })); waited += 50) {
      assert.ok(waited < 5_000, 'the use is noted');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const first = await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: adminHeaders });
    assert.equal(first.statusCode, 200);
    assert.equal(first.json().status, 'revoked');
    const listed = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json().keys[0];
    assert.ok(first.json().last_used_at, 'the revoked key says when it was last used');
    assert.equal(first.json().last_used_at, listed.last_used_at);
    const revokedAt = first.json().revoked_at;
    const second = await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${created.id}`, headers: adminHeaders });
    assert.equal(second.json().revoked_at, revokedAt, 'a second delete keeps the first revocation time');
    const unknown = await harness.app.inject({ method: 'DELETE', url: '/admin/keys/key_nope', headers: adminHeaders });
    assert.equal(unknown.statusCode, 404);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(created.key) })).statusCode, 401);
  });

  it('404s an unknown account', async () => {
    const response = await harness.app.inject({ method: 'GET', url: '/admin/accounts/acct_nobody', headers: adminHeaders });
    assert.equal(response.statusCode, 404);
    assert.equal(response.json().error.code, 'resource_not_found');
  });

  it('lists restricted models only for a restricted key', async () => {
    const account = await createAccount(harness.app, { name: 'Restricted' });
    const restricted = await createKey(harness.app, account.id, { name: 'r', models: ['sora-2', 'gpt-image-1'] });
    const listed = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(restricted.key) });
    assert.deepEqual(
      listed.json().data.map((model: { id: string }) => model.id).sort(),
      ['gpt-image-1', 'sora-2'],
    );
  });
});
