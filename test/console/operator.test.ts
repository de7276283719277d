import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TaskStore } from '../../store/tasks.ts';
import { bearer, createKey, startTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';
import { insertUsage, taskDocument } from '../helpers/console-fixtures.ts';
import { ConsoleClient, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// The operator's pages: accounts, creating one with its holder's console sign-in, credits,
// keys and spend per account, and links from tasks into the Temporal Web UI.

const TEMPORAL_UI = 'http://temporal-ui.example:8233';

describe('console operator pages', () => {
  let harness: TestApp;
  let operator: ConsoleClient;
  before(async () => {
    harness = await startTestApp('console_operator', { TEMPORAL_UI_URL: `${TEMPORAL_UI}/`, TEMPORAL_NAMESPACE: 'prod ns' });
    operator = new ConsoleClient(harness.app);
    assert.equal((await operator.signInAsOperator()).statusCode, 303);
  });
  after(() => harness.close());

  async function createAccount(fields: Record<string, string>) {
    await operator.get('/console/operator');
    return operator.post('/console/operator/accounts', fields);
  }

  it('creates an account with an opening balance and a console sign-in the holder can use at once', async () => {
    const email = `${uniqueName('new-holder')}@example.com`;
    const created = await createAccount({ name: 'Fresh <Co>', opening_balance_usd: '25.50', console_email: email, console_password: 'a password for the holder' });
    assert.equal(created.statusCode, 303);
    const location = created.headers.location as string;
    assert.match(location, /^\/console\/operator\/accounts\/acct_[\w-]+\?notice=created$/);

    const page = await operator.get(location);
    assert.equal(page.statusCode, 200);
    const text = visibleText(page.body);
    assert.match(text, /Account created\./);
    assert.match(text, /Fresh <Co> Balance \$25\.50 Held \$0\.00 Spent \$0\.00/);
    assert.ok(page.body.includes('Fresh &lt;Co&gt;'));
    assert.match(text, new RegExp(`Console sign-ins ${email.replace(/[.+]/g, '\\$&')}`));

    const list = await operator.get('/console/operator');
    assert.match(visibleText(list.body), /Fresh <Co> acct_\S+ \$25\.50 \$0\.00 \$0\.00/);

    const holder = new ConsoleClient(harness.app);
    assert.equal((await holder.signIn(email, 'a password for the holder')).headers.location, '/console/keys');
    assert.match(visibleText((await holder.get('/console/keys')).body), /balance \$25\.50/);
  });

  it('refuses an account form with a bad amount, half a sign-in or a taken email, and keeps what was typed', async () => {
    const badAmount = await createAccount({ name: 'Typo Ltd', opening_balance_usd: '12.3456789' });
    assert.equal(badAmount.statusCode, 400);
    assert.match(visibleText(badAmount.body), /Enter an amount in USD such as 25 or 12\.50/);
    assert.match(badAmount.body, /name="name" type="text" value="Typo Ltd"/);
    const half = await createAccount({ name: 'Half', console_email: 'half@example.com' });
    assert.equal(half.statusCode, 400);
    assert.match(visibleText(half.body), /Give both an email and a password/);

    const email = `${uniqueName('dupe')}@example.com`;
    assert.equal((await createAccount({ name: 'Owner', console_email: email, console_password: 'first long password' })).statusCode, 303);
    const accountsBefore = await harness.database.db.collection('accounts').countDocuments({});
    const taken = await createAccount({ name: 'Copycat', console_email: email, console_password: 'second long password' });
    assert.equal(taken.statusCode, 409);
    assert.match(visibleText(taken.body), /already signs in to another account/);
    assert.equal(await harness.database.db.collection('accounts').countDocuments({}), accountsBefore);
  });

  it('adds credits exactly once per form, even when the same form is sent twice', async () => {
    const created = await createAccount({ name: 'Credits', opening_balance_usd: '1' });
    const accountPage = created.headers.location as string;
    const accountId = /accounts\/(acct_[\w-]+)/.exec(accountPage)![1]!;
    const page = await operator.get(accountPage);
    const reference = /name="reference" value="([^"]+)"/.exec(page.body)![1]!;

    const first = await operator.post(`/console/operator/accounts/${accountId}/credits`, { amount_usd: '0.2', reference });
    assert.equal(first.statusCode, 303);
    assert.equal(first.headers.location, `/console/operator/accounts/${accountId}?notice=credited`);
    const resent = await operator.post(`/console/operator/accounts/${accountId}/credits`, { amount_usd: '0.2', reference });
    assert.equal(resent.statusCode, 303);
    // Told it was sent already, not "added" a second time (console review).
    assert.equal(resent.headers.location, `/console/operator/accounts/${accountId}?notice=credited_before`);
    assert.match(visibleText((await operator.get(resent.headers.location as string)).body), /That form was sent already: its credits were added once, then\./);
    const after = await operator.get(`/console/operator/accounts/${accountId}?notice=credited`);
    assert.match(visibleText(after.body), /Credits added\./);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec(after.body)?.[1], '$1.20');
    // The same form corrected and sent again: nothing more moves, and the page says so.
    const corrected = await operator.post(`/console/operator/accounts/${accountId}/credits`, { amount_usd: '2', reference });
    assert.equal(corrected.statusCode, 409);
    assert.match(visibleText(corrected.body), /This form was already sent with \$0\.20, which was added; nothing more moved\. Reload the page to send another amount\./);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec(corrected.body)?.[1], '$1.20');

    for (const amount of ['0', '-1', 'ten', '0.0000001', '1000000000.000001', '9007199254']) {
      const refused = await operator.post(`/console/operator/accounts/${accountId}/credits`, { amount_usd: amount, reference: /name="reference" value="([^"]+)"/.exec(operator.lastPage)?.[1] ?? reference });
      assert.equal(refused.statusCode, 400, amount);
    }
    assert.match(visibleText(operator.lastPage), /Enter at most 1,000,000,000 USD\./);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec((await operator.get(`/console/operator/accounts/${accountId}`)).body)?.[1], '$1.20');
    // An account holds at most $1,000,000,000: a credit past that is refused and adds nothing.
    const pastLimit = await operator.post(`/console/operator/accounts/${accountId}/credits`, { amount_usd: '1000000000', reference: /name="reference" value="([^"]+)"/.exec(operator.lastPage)![1]! });
    assert.equal(pastLimit.statusCode, 409);
    assert.match(visibleText(pastLimit.body), /Cannot add \$1000000000\.000000: the account holds \$1\.200000 .* at most \$1000000000\.000000\. Nothing was added\./);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec((await operator.get(`/console/operator/accounts/${accountId}`)).body)?.[1], '$1.20');
    assert.equal((await operator.get('/console/operator/accounts/acct_nobody')).statusCode, 404);
  });

  it('takes credits back once per form, and shows what is free when asked for more', async () => {
    const created = await createAccount({ name: 'Deductions', opening_balance_usd: '1' });
    const accountId = /accounts\/(acct_[\w-]+)/.exec(created.headers.location as string)![1]!;
    const page = await operator.get(`/console/operator/accounts/${accountId}`);
    assert.match(page.body, /<label for="field-deduction-amount_usd">Amount to take back \(USD\)<\/label>/);
    const reference = /name="reference" value="([^"]+)"/.exec(page.body)![1]!;

    const first = await operator.post(`/console/operator/accounts/${accountId}/deductions`, { amount_usd: '0.3', reference });
    assert.equal(first.headers.location, `/console/operator/accounts/${accountId}?notice=deducted`);
    const resent = await operator.post(`/console/operator/accounts/${accountId}/deductions`, { amount_usd: '0.3', reference });
    assert.equal(resent.statusCode, 303);
    assert.equal(resent.headers.location, `/console/operator/accounts/${accountId}?notice=deducted_before`);
    const after = await operator.get(`/console/operator/accounts/${accountId}?notice=deducted`);
    assert.match(visibleText(after.body), /Credits taken back\./);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec(after.body)?.[1], '$0.70');
    const corrected = await operator.post(`/console/operator/accounts/${accountId}/deductions`, { amount_usd: '0.1', reference });
    assert.equal(corrected.statusCode, 409);
    assert.match(visibleText(corrected.body), /This form was already sent with \$0\.30, which was taken back; nothing more moved\./);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec(corrected.body)?.[1], '$0.70');
    // A form of another account's page names a movement of that account only.
    const other = await createAccount({ name: 'Deductions elsewhere', opening_balance_usd: '1' });
    const otherId = /accounts\/(acct_[\w-]+)/.exec(other.headers.location as string)![1]!;
    const elsewhere = await operator.post(`/console/operator/accounts/${otherId}/deductions`, { amount_usd: '0.3', reference });
    assert.equal(elsewhere.headers.location, `/console/operator/accounts/${otherId}?notice=deducted`);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec((await operator.get(`/console/operator/accounts/${otherId}`)).body)?.[1], '$0.70');

    const tooMuch = await operator.post(`/console/operator/accounts/${accountId}/deductions`, { amount_usd: '5', reference: /name="reference" value="([^"]+)"/.exec(after.body)![1]! });
    assert.equal(tooMuch.statusCode, 409);
    assert.match(visibleText(tooMuch.body), /free balance is \$0\.700000\. Nothing was taken/);
    assert.match(tooMuch.body, /id="field-deduction-amount_usd" name="amount_usd" type="text" value="5"[^>]*aria-invalid="true"/);
    assert.equal(/data-testid="operator-balance">([^<]+)</.exec(tooMuch.body)?.[1], '$0.70');
  });

  it('adds a sign-in to an existing account and changes its password', async () => {
    const created = await createAccount({ name: 'Later sign-in' });
    const accountId = /accounts\/(acct_[\w-]+)/.exec(created.headers.location as string)![1]!;
    const email = `${uniqueName('later')}@example.com`;
    await operator.get(`/console/operator/accounts/${accountId}`);
    const added = await operator.post(`/console/operator/accounts/${accountId}/sign-ins`, { console_email: email, console_password: 'first password here' });
    assert.equal(added.headers.location, `/console/operator/accounts/${accountId}?notice=sign_in_created`);
    const earlier = new ConsoleClient(harness.app);
    assert.equal((await earlier.signIn(email, 'first password here')).statusCode, 303);
    assert.equal((await earlier.get('/console/keys')).statusCode, 200);

    const changed = await operator.post(`/console/operator/accounts/${accountId}/sign-ins`, { console_email: email, console_password: 'second password here' });
    assert.equal(changed.headers.location, `/console/operator/accounts/${accountId}?notice=password_changed`);
    const ended = await earlier.get('/console/keys');
    assert.equal(ended.statusCode, 303, 'a session opened with the old password ends');
    assert.equal(ended.headers.location, '/console/sign-in?expired=1&next=%2Fconsole%2Fkeys');
    const holder = new ConsoleClient(harness.app);
    assert.equal((await holder.signIn(email, 'first password here')).statusCode, 401);
    assert.equal((await holder.signIn(email, 'second password here')).statusCode, 303);
    assert.equal((await holder.get('/console/keys')).statusCode, 200);
    const short = await operator.post(`/console/operator/accounts/${accountId}/sign-ins`, { console_email: email, console_password: 'short' });
    assert.equal(short.statusCode, 400);
    assert.match(visibleText(short.body), /must be at least 12 characters/);
  });

  it("shows an account's keys with their spend, and links each task to its history in the Temporal Web UI", async () => {
    const created = await createAccount({ name: 'Busy', opening_balance_usd: '10' });
    const accountId = /accounts\/(acct_[\w-]+)/.exec(created.headers.location as string)![1]!;
    const key = await createKey(harness.app, accountId, { name: 'render farm', models: ['seedance-2.0'] });
    await insertUsage(harness.database.db, [
      { account_id: accountId, key_id: key.id, day: '2026-01-05', kind: 'video', video_seconds: 5, spend_micros: 400_000 },
      { account_id: accountId, key_id: key.id, day: '2026-01-06', kind: 'chat', requests: 4, input_tokens: 10, output_tokens: 10, spend_micros: 25 },
    ]);
    await new TaskStore(harness.database.db).insert(taskDocument({ _id: 'task_operator_view', account_id: accountId, key_id: key.id }));

    const page = await operator.get(`/console/operator/accounts/${accountId}`);
    const keys = visibleText(/data-testid="operator-keys"[\s\S]*?<\/table>/.exec(page.body)?.[0] ?? '');
    assert.match(keys, /render farm fg_…\S{4} seedance-2\.0 Change active .* 5 \$0\.400025/);
    assert.ok(page.body.includes(`href="${TEMPORAL_UI}/namespaces/prod%20ns/workflows/task_operator_view"`), 'a link to the workflow history');
  });

  it('pages through accounts, newest first', async () => {
    const first = await operator.get('/console/operator');
    const names = [...first.body.matchAll(/<tr data-account-id="[^"]+">\s*<td><a [^>]+>([^<]+)</g)].map((match) => match[1]);
    assert.equal(names[0], 'Busy', 'the newest account comes first');
    assert.ok(!first.body.includes('Older →'), 'fewer accounts than a page: no next page');
    const beyond = await operator.get('/console/operator?page=2');
    assert.match(visibleText(beyond.body), /No accounts on this page\./);
  });

  it("deletes an account's key after asking, and the key answers 401 from its next call", async () => {
    // A holder's key leaked: before, only the holder's own page or curl could delete it.
    const created = await createAccount({ name: 'Leaky Co' });
    const accountId = /accounts\/(acct_[\w-]+)/.exec(created.headers.location as string)![1]!;
    const leaked = await createKey(harness.app, accountId, { name: 'leaked <key>' });
    const other = await createKey(harness.app, (await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, payload: { name: 'Other' } })).json().id, { name: 'theirs' });
    const accountPage = await operator.get(`/console/operator/accounts/${accountId}`);
    const revokeHref = `/console/operator/accounts/${accountId}/keys/${leaked.id}/revoke`;
    assert.match(accountPage.body, new RegExp(`<a href="${revokeHref}" aria-label="Delete leaked &lt;key&gt;">Delete</a>`));

    const confirm = await operator.get(revokeHref);
    assert.equal(confirm.statusCode, 200);
    assert.match(visibleText(confirm.body), /Delete key “leaked <key>”\?/);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(leaked.key) })).statusCode, 200, 'asking deletes nothing');
    assert.equal((await operator.post(revokeHref, {}, { csrf: false })).statusCode, 403, 'no form token, no deletion');
    await operator.get(revokeHref);
    const deleted = await operator.post(revokeHref, {});
    assert.equal(deleted.statusCode, 303);
    assert.equal(deleted.headers.location, `/console/operator/accounts/${accountId}?notice=key_revoked#keys`);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(leaked.key) })).statusCode, 401);
    const after = await operator.get(`/console/operator/accounts/${accountId}?notice=key_revoked`);
    assert.match(visibleText(after.body), /Key deleted\. Every call made with it now answers 401\./);
    assert.match(after.body, new RegExp(`<tr data-key-id="${leaked.id}">[\\s\\S]*?badge revoked`));
    assert.ok(!after.body.includes(revokeHref), 'a deleted key has no delete link');
    // Another account's key cannot be reached through this one.
    assert.equal((await operator.get(`/console/operator/accounts/${accountId}/keys/${other.id}/revoke`)).statusCode, 404);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(other.key) })).statusCode, 200);
  });

  it("changes an account's key's models on the key's page, effective on its next call", async () => {
    const created = await createAccount({ name: 'Models Co' });
    const accountId = /accounts\/(acct_[\w-]+)/.exec(created.headers.location as string)![1]!;
    const key = await createKey(harness.app, accountId, { name: 'narrow', models: ['sora-2'] });
    const modelStatus = async (model: string) => (await harness.app.inject({ method: 'GET', url: `/v1/models/${model}`, headers: bearer(key.key) })).statusCode;
    const keyPage = `/console/operator/accounts/${accountId}/keys/${key.id}/rate-limits`;
    assert.ok((await operator.get(`/console/operator/accounts/${accountId}`)).body.includes(`href="${keyPage}#models" aria-label="Change the models of narrow"`));
    const page = await operator.get(keyPage);
    assert.match(page.body, /value="sora-2" checked/);
    const action = `/console/operator/accounts/${accountId}/keys/${key.id}/models`;
    assert.equal((await operator.post(action, { models: 'gpt-4o-mini' }, { csrf: false })).statusCode, 403, 'no form token, no change');
    await operator.get(keyPage);
    const refused = await operator.post(action, { models: ['gpt-4o-mini', 'gpt-99'] });
    assert.equal(refused.statusCode, 400);
    assert.match(visibleText(refused.body), /Choose models from the list\./);
    assert.match(refused.body, /value="gpt-4o-mini" checked/, 'what was ticked stays ticked');
    assert.equal(await modelStatus('gpt-4o-mini'), 403);
    await operator.get(keyPage);
    const saved = await operator.post(action, { models: 'gpt-4o-mini' });
    assert.deepEqual([saved.statusCode, saved.headers.location], [303, `/console/operator/accounts/${accountId}?notice=key_models_saved#keys`]);
    assert.deepEqual([await modelStatus('gpt-4o-mini'), await modelStatus('sora-2')], [200, 403]);
    assert.match(visibleText((await operator.get(`/console/operator/accounts/${accountId}?notice=key_models_saved`)).body), /Models saved\./);
    // Another account's key cannot be reached through this one.
    const other = await createKey(harness.app, (await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, payload: { name: 'Other' } })).json().id, { name: 'theirs', models: ['sora-2'] });
    await operator.get(keyPage);
    assert.equal((await operator.post(`/console/operator/accounts/${accountId}/keys/${other.id}/models`, { models: 'gpt-4o-mini' })).statusCode, 404);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models/gpt-4o-mini', headers: bearer(other.key) })).statusCode, 403);
  });
});
