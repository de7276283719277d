import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';
import { awayFromMinuteEdge } from '../helpers/minute-window.ts';

// Rate-limit overrides in the console: the operator sets and clears an account's limits on its
// page and a key's on the key's own page (refused input comes back marked, CSRF is required),
// the holder sees what applies to each key but cannot change it, and a limit set here really
// limits /v1.

/** The visible text of one key's row in a keys table. */
function rowText(page: string, keyId: string): string {
  return visibleText(new RegExp(`<tr data-key-id="${keyId}">[\\s\\S]*?</tr>`).exec(page)?.[0] ?? '');
}

describe('console rate limits', () => {
  let harness: TestApp;
  let operator: ConsoleClient;
  before(async () => {
    harness = await startTestApp('console_limits', { RATE_LIMIT_REQUESTS_PER_MINUTE: '600', RATE_LIMIT_TOKENS_PER_MINUTE: '50000' });
    operator = new ConsoleClient(harness.app);
    assert.equal((await operator.signInAsOperator()).statusCode, 303);
  });
  after(() => harness.close());

  it('sets and clears an account\'s and a key\'s limits, showing what applies to each key', async () => {
    const account = await createAccount(harness.app, { name: 'limited', balance_usd: 1 });
    const key = await createKey(harness.app, account.id, { name: 'first' });
    const page = `/console/operator/accounts/${account.id}`;
    const keyPage = `${page}/keys/${key.id}/rate-limits`;
    const before = await operator.get(page);
    assert.match(rowText(before.body, key.id), /^first .* 600 req\/min · 50,000 tok\/min Change/);
    assert.match(before.body, /placeholder="600 \(default\)"/);
    assert.ok(before.body.includes(`href="${keyPage}"`), 'the key row links to its limits page');

    const setAccount = await operator.post(`${page}/rate-limits`, { requests_per_minute: ' 120 ', tokens_per_minute: '' });
    assert.equal(setAccount.statusCode, 303);
    assert.equal(setAccount.headers.location, `${page}?notice=limits_saved#rate-limits`);
    const afterAccount = await operator.get(setAccount.headers.location as string);
    assert.match(visibleText(afterAccount.body), /Rate limits saved\./);
    assert.match(afterAccount.body, /name="requests_per_minute" type="text" value="120"/);
    assert.match(rowText(afterAccount.body, key.id), /120 req\/min · 50,000 tok\/min/);

    // The key's page: an empty field falls back to the account's figure, or to the default.
    const form = await operator.get(keyPage);
    assert.equal(form.statusCode, 200);
    assert.match(visibleText(form.body), /Rate limits of key “first” .* Applies now 120 req\/min · 50,000 tok\/min/);
    assert.match(form.body, /placeholder="120 \(account\)"/);
    assert.match(form.body, /placeholder="50000 \(default\)"/);
    const setKey = await operator.post(keyPage, { requests_per_minute: '', tokens_per_minute: '900' });
    assert.equal(setKey.statusCode, 303);
    assert.equal(setKey.headers.location, `${page}?notice=limits_saved#keys`);
    assert.match(rowText((await operator.get(page)).body, key.id), /120 req\/min · 900 tok\/min/);
    const stored = await harness.database.db.collection('api_key_rate_limits').findOne({ _id: key.id as never });
    assert.deepEqual(stored?.rate_limits, { requests_per_minute: null, tokens_per_minute: 900 });
    assert.match((await operator.get(keyPage)).body, /name="tokens_per_minute" type="text" value="900"/);

    // Cleared: the defaults apply again.
    await operator.get(page);
    assert.equal((await operator.post(`${page}/rate-limits`, { requests_per_minute: '', tokens_per_minute: '' })).statusCode, 303);
    assert.equal((await operator.post(keyPage, { requests_per_minute: '', tokens_per_minute: '' })).statusCode, 303);
    assert.match(rowText((await operator.get(page)).body, key.id), /600 req\/min · 50,000 tok\/min/);
    const cleared = await harness.database.db.collection('account_rate_limits').findOne({ _id: account.id as never });
    assert.deepEqual(cleared?.rate_limits, { requests_per_minute: null, tokens_per_minute: null });
  });

  it('refuses bad numbers with the field marked, a form without CSRF, and another account\'s key', async () => {
    const account = await createAccount(harness.app, { name: 'refusals', balance_usd: 1 });
    const key = await createKey(harness.app, account.id, { name: 'mine' });
    const other = await createAccount(harness.app, { name: 'someone else', balance_usd: 1 });
    const othersKey = await createKey(harness.app, other.id, { name: 'theirs' });
    const page = `/console/operator/accounts/${account.id}`;
    const keyPage = `${page}/keys/${key.id}/rate-limits`;
    await operator.get(page);
    for (const value of ['0', '-5', '1.5', 'lots', '3,000', '2000000000']) {
      const refused = await operator.post(`${page}/rate-limits`, { requests_per_minute: value, tokens_per_minute: '' });
      assert.equal(refused.statusCode, 400, value);
      assert.match(refused.body, /id="field-requests_per_minute"[^>]*aria-invalid="true"/);
      assert.match(visibleText(refused.body), /Enter (a whole number|a number from 1)/);
      assert.ok(refused.body.includes(`value="${value}"`), `what was typed (${value}) is kept`);
    }
    const refusedKey = await operator.post(keyPage, { requests_per_minute: '5', tokens_per_minute: 'many' });
    assert.equal(refusedKey.statusCode, 400);
    assert.match(refusedKey.body, /id="field-tokens_per_minute"[^>]*aria-invalid="true"/);
    assert.match(visibleText(refusedKey.body), /Rate limits of key “mine”.*Enter a whole number/);
    assert.ok(refusedKey.body.includes('value="5"'), 'the valid field keeps what was typed too');

    const withoutCsrf = await operator.post(`${page}/rate-limits`, { requests_per_minute: '5' }, { csrf: false });
    assert.equal(withoutCsrf.statusCode, 403);
    const keyWithoutCsrf = await operator.post(keyPage, { requests_per_minute: '5' }, { csrf: false });
    assert.equal(keyWithoutCsrf.statusCode, 403);
    assert.equal((await operator.get(`${page}/keys/${othersKey.id}/rate-limits`)).statusCode, 404);
    const token = await operator.csrfToken(page);
    const foreign = await operator.post(`${page}/keys/${othersKey.id}/rate-limits`, { requests_per_minute: '5' }, { csrf: token });
    assert.equal(foreign.statusCode, 404);
    assert.equal((await operator.post(`/console/operator/accounts/acct_missing/rate-limits`, { requests_per_minute: '5' }, { csrf: token })).statusCode, 404);

    const db = harness.database.db;
    assert.equal(await db.collection('account_rate_limits').findOne({ _id: account.id as never }), null, 'nothing was saved');
    assert.equal(await db.collection('api_key_rate_limits').findOne({ _id: key.id as never }), null);
    assert.equal(await db.collection('api_key_rate_limits').findOne({ _id: othersKey.id as never }), null);
  });

  it('offers no limits form for a revoked key', async () => {
    const account = await createAccount(harness.app, { name: 'revoked keys', balance_usd: 1 });
    const key = await createKey(harness.app, account.id, { name: 'gone' });
    assert.equal((await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${key.id}`, headers: adminHeaders })).statusCode, 200);
    const row = rowText((await operator.get(`/console/operator/accounts/${account.id}`)).body, key.id);
    assert.match(row, /revoked 600 req\/min · 50,000 tok\/min/);
    assert.doesNotMatch(row, /Change/);
  });

  it('saves nothing for a key revoked while its limits form was open, and says so', async () => {
    const account = await createAccount(harness.app, { name: 'revoked meanwhile', balance_usd: 1 });
    const key = await createKey(harness.app, account.id, { name: 'going' });
    const page = `/console/operator/accounts/${account.id}`;
    const keyPage = `${page}/keys/${key.id}/rate-limits`;
    const token = await operator.csrfToken(keyPage);
    assert.equal((await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${key.id}`, headers: adminHeaders })).statusCode, 200);
    const sent = await operator.post(keyPage, { requests_per_minute: '5', tokens_per_minute: '' }, { csrf: token });
    assert.equal(sent.statusCode, 303);
    assert.equal(sent.headers.location, `${page}?notice=key_gone_limits#keys`);
    assert.match(visibleText((await operator.get(sent.headers.location as string)).body), /That key is deleted: it makes no calls, so rate limits do not apply to it\./);
    assert.equal(await harness.database.db.collection('api_key_rate_limits').findOne({ _id: key.id as never }), null, 'nothing was saved');
  });

  it('shows the holder each key\'s limits read-only, and a key limit set here limits /v1', async () => {
    const email = `${uniqueName('limits')}@example.com`;
    const { id: accountId } = await createAccountWithSignIn(harness.app, { name: 'holder', balance_usd: 1, console_email: email, console_password: 'a long holder password' });
    const key = await createKey(harness.app, accountId, { name: 'tight' });
    const keyPage = `/console/operator/accounts/${accountId}/keys/${key.id}/rate-limits`;
    await operator.get(keyPage);
    assert.equal((await operator.post(keyPage, { requests_per_minute: '2', tokens_per_minute: '' })).statusCode, 303);

    const holder = new ConsoleClient(harness.app);
    assert.equal((await holder.signIn(email, 'a long holder password')).statusCode, 303);
    const keysPage = await holder.get('/console/keys');
    assert.match(rowText(keysPage.body, key.id), /tight .* 2 req\/min · 50,000 tok\/min/);
    assert.match(visibleText(keysPage.body), /Higher limits are arranged with the operator\./);
    assert.ok(!keysPage.body.includes('rate-limits'), 'no limits form or link for the holder');
    // The operator's pages turn a holder's session away, to the holder's own pages.
    for (const attempt of [await holder.get(keyPage), await holder.post(keyPage, { requests_per_minute: '9999' })]) {
      assert.equal(attempt.statusCode, 303);
      assert.equal(attempt.headers.location, '/console/keys');
    }
    const stored = await harness.database.db.collection('api_key_rate_limits').findOne({ _id: key.id as never });
    assert.equal(stored?.rate_limits?.requests_per_minute, 2, 'the holder changed nothing');

    await awayFromMinuteEdge();
    const statuses: number[] = [];
    for (let index = 0; index < 3; index++) statuses.push((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key.key) })).statusCode);
    assert.deepEqual(statuses, [200, 200, 429]);
  });
});
