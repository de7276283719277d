import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';
import { awayFromMinuteEdge } from '../helpers/minute-window.ts';

// Rate-limit overrides in the console: the operator sets and clears an account's and a key's
// per-minute limits (refused input comes back marked, CSRF is required), the holder sees what
// applies to each key but cannot change it, and a limit set here really limits /v1.

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
    assert.match(visibleText((await operator.get(page)).body), /first .* 600 req\/min · 50,000 tok\/min/);

    const setAccount = await operator.post(`${page}/rate-limits`, { requests_per_minute: '120', tokens_per_minute: '' });
    assert.equal(setAccount.statusCode, 303);
    assert.equal(setAccount.headers.location, `${page}?notice=limits_saved#rate-limits`);
    let text = visibleText((await operator.get(setAccount.headers.location as string)).body);
    assert.match(text, /Rate limits saved\./);
    assert.match(text, /first .* 120 req\/min · 50,000 tok\/min/);

    const setKey = await operator.post(`${page}/keys/${key.id}/rate-limits`, { requests_per_minute: '', tokens_per_minute: '900' });
    assert.equal(setKey.statusCode, 303);
    text = visibleText((await operator.get(page)).body);
    assert.match(text, /first .* 120 req\/min · 900 tok\/min/);
    const stored = await harness.database.db.collection('api_keys').findOne({ _id: key.id as never });
    assert.deepEqual(stored?.rate_limits, { requests_per_minute: null, tokens_per_minute: 900 });

    // Cleared: the defaults apply again.
    await operator.get(page);
    assert.equal((await operator.post(`${page}/rate-limits`, { requests_per_minute: '', tokens_per_minute: '' })).statusCode, 303);
    await operator.get(page);
    assert.equal((await operator.post(`${page}/keys/${key.id}/rate-limits`, { requests_per_minute: '', tokens_per_minute: '' })).statusCode, 303);
    assert.match(visibleText((await operator.get(page)).body), /first .* 600 req\/min · 50,000 tok\/min/);
  });

  it('refuses bad numbers with the field marked, a form without CSRF, and another account\'s key', async () => {
    const account = await createAccount(harness.app, { name: 'refusals', balance_usd: 1 });
    const other = await createAccount(harness.app, { name: 'someone else', balance_usd: 1 });
    const othersKey = await createKey(harness.app, other.id, { name: 'theirs' });
    const page = `/console/operator/accounts/${account.id}`;
    await operator.get(page);
    for (const value of ['0', '-5', '1.5', 'lots', '2000000000']) {
      const refused = await operator.post(`${page}/rate-limits`, { requests_per_minute: value, tokens_per_minute: '' });
      assert.equal(refused.statusCode, 400, value);
      assert.match(refused.body, /aria-invalid="true"/);
      assert.match(visibleText(refused.body), /Enter (a whole number|a number from 1)/);
    }
    const withoutCsrf = await operator.post(`${page}/rate-limits`, { requests_per_minute: '5' }, { csrf: false });
    assert.equal(withoutCsrf.statusCode, 403);
    await operator.get(page);
    const foreign = await operator.post(`${page}/keys/${othersKey.id}/rate-limits`, { requests_per_minute: '5' });
    assert.equal(foreign.statusCode, 404);
    const stored = await harness.database.db.collection('accounts').findOne({ _id: account.id as never });
    assert.equal(stored?.rate_limits, undefined, 'nothing was saved');
  });

  it('shows the holder each key\'s limits read-only, and a key limit set here limits /v1', async () => {
    const email = `${uniqueName('limits')}@example.com`;
    const { id: accountId } = await createAccountWithSignIn(harness.app, { name: 'holder', balance_usd: 1, console_email: email, console_password: 'a long holder password' });
    const key = await createKey(harness.app, accountId, { name: 'tight' });
    const page = `/console/operator/accounts/${accountId}`;
    await operator.get(page);
    assert.equal((await operator.post(`${page}/keys/${key.id}/rate-limits`, { requests_per_minute: '2', tokens_per_minute: '' })).statusCode, 303);

    const holder = new ConsoleClient(harness.app);
    await holder.signIn(email, 'a long holder password');
    const keysPage = await holder.get('/console/keys');
    assert.match(visibleText(keysPage.body), /tight .* 2 req\/min · 50,000 tok\/min/);
    assert.ok(!keysPage.body.includes('rate-limits"'), 'no limits form for the holder');
    const attempt = await holder.post(`${page}/keys/${key.id}/rate-limits`, { requests_per_minute: '9999' });
    assert.ok(!String(attempt.headers.location).includes('limits_saved'), `a holder is turned away (${attempt.headers.location})`);
    const stored = await harness.database.db.collection('api_keys').findOne({ _id: key.id as never });
    assert.equal(stored?.rate_limits?.requests_per_minute, 2, 'the holder changed nothing');

    await awayFromMinuteEdge();
    const statuses: number[] = [];
    for (let index = 0; index < 3; index++) statuses.push((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key.key) })).statusCode);
    assert.deepEqual(statuses, [200, 200, 429]);
  });
});
