import assert from 'node:assert/strict';
import { UsageStore } from '../../store/usage.ts';
import { after, before, describe, it } from 'node:test';
import { hashApiKey, isWellFormedApiKey } from '../../core/api-keys.ts';
import { openCreatedKey, sealCreatedKey } from '../../api/console/created-key-flash.ts';
import { bearer, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// The API keys pages: create with a model restriction, the plaintext shown exactly once,
// the list, and deletion (revocation) that a key feels on its very next call.

const PASSWORD = 'a long enough console password';

describe('console keys', () => {
  let harness: TestApp;
  let browser: ConsoleClient;
  let accountId: string;
  before(async () => {
    harness = await startTestApp('console_keys');
    const email = `${uniqueName('keys')}@example.com`;
    accountId = (await createAccountWithSignIn(harness.app, { name: 'Keys Inc', balance_usd: 5, console_email: email, console_password: PASSWORD })).id;
    browser = new ConsoleClient(harness.app);
    assert.equal((await browser.signIn(email, PASSWORD)).statusCode, 303);
  });
  after(() => harness.close());

  async function createThroughConsole(fields: Record<string, string | string[]>) {
    await browser.get('/console/keys');
    const created = await browser.post('/console/keys', fields);
    assert.equal(created.statusCode, 303, created.body);
    assert.equal(created.headers.location, '/console/keys/created');
    const shown = await browser.get('/console/keys/created');
    assert.equal(shown.statusCode, 200);
    const plaintext = /value="(fg_[0-9A-Za-z]{49})"/.exec(shown.body)?.[1];
    assert.ok(plaintext, 'the new key is on the page');
    return { plaintext, page: shown.body };
  }

  it('makes one key of a form sent twice, and says so to the second', async () => {
    const before = await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId });
    const page = await browser.get('/console/keys');
    const fields = { _csrf: /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!, reference: /name="reference" value="([^"]+)"/.exec(page.body)![1]!, name: 'double click' };
    // Both at once, as a resubmit on a slow network sends them.
    const answers = await Promise.all([0, 1].map(() => browser.post('/console/keys', fields, { csrf: false })));
    assert.deepEqual(answers.map((answer) => answer.headers.location).sort(), ['/console/keys/created', '/console/keys?notice=already_created']);
    assert.equal(await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId }), before + 1);
    assert.match(visibleText((await browser.get('/console/keys?notice=already_created')).body), /That form was sent already: its key is in the list below/);
    // A fresh page makes a fresh form.
    await createThroughConsole({ name: 'after the double click' });
    assert.equal(await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId }), before + 2);
  });

  it('creates a key restricted to chosen models, shows its plaintext once with a warning, and stores only its hash', async () => {
    const { plaintext, page } = await createThroughConsole({ name: 'video only', models: ['seedance-2.0', 'sora-2'] });
    assert.ok(isWellFormedApiKey(plaintext));
    assert.match(visibleText(page), /Copy this key now\. It is shown only this once/);
    assert.match(page, /data-copy="#new-key" hidden/, 'the copy button waits for JavaScript');

    const stored = await harness.database.db.collection('api_keys').findOne({ hash: hashApiKey(plaintext) });
    assert.equal(stored?.account_id, accountId);
    assert.deepEqual(stored?.models, ['seedance-2.0', 'sora-2']);
    assert.ok(!JSON.stringify(stored).includes(plaintext));

    const again = await browser.get('/console/keys/created');
    assert.ok(!again.body.includes(plaintext), 'a reload never shows the plaintext again');
    assert.match(visibleText(again.body), /shown only once/);

    const list = await browser.get('/console/keys');
    assert.ok(!list.body.includes(plaintext), 'the list never shows the plaintext');
    const row = visibleText(new RegExp(`<tr data-key-id="${stored!._id}">[\\s\\S]*?</tr>`).exec(list.body)?.[0] ?? '');
    assert.match(row, new RegExp(`video only fg_…${plaintext.slice(-4)} seedance-2\\.0, sora-2 3,000 req/min · 2,000,000 tok/min \\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2} UTC — active`));

    const models = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(plaintext) });
    assert.equal(models.statusCode, 200);
    assert.deepEqual(models.json().data.map((model: { id: string }) => model.id).sort(), ['seedance-2.0', 'sora-2']);
  });

  it('shows nothing from a copy of the one-time cookie kept past its two minutes', async () => {
    await browser.get('/console/keys');
    assert.equal((await browser.post('/console/keys', { name: 'cookie kept' })).statusCode, 303);
    const cookie = browser.cookies.get('fg_console_new_key');
    assert.ok(cookie, 'the POST sets the one-time cookie');
    const session = browser.cookies.get('fg_console_session');
    assert.ok(session);
    const opened = openCreatedKey(session, cookie);
    assert.match(opened?.plaintext ?? '', /^fg_/);
    assert.equal(openCreatedKey(session, cookie, Date.now() + 121_000), null, 'past its lifetime the sealed value opens to nothing');
    // One sealed more than two minutes ago opens to nothing either.
    assert.equal(openCreatedKey(session, sealCreatedKey(session, opened!, Date.now() - 121_000)), null);
    assert.ok((await browser.get('/console/keys/created')).body.includes(opened!.plaintext), 'within them it is shown');
  });

  it('creates an unrestricted key when no model is ticked', async () => {
    const { plaintext } = await createThroughConsole({ name: 'everything' });
    const stored = await harness.database.db.collection('api_keys').findOne({ hash: hashApiKey(plaintext) });
    assert.equal(stored?.models, null);
    assert.match(visibleText((await browser.get('/console/keys')).body), /everything fg_…\S{4} all models/);
  });

  it('refuses a key without a name or with an unknown model, and keeps what was typed', async () => {
    const before = await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId });
    await browser.get('/console/keys');
    const unnamed = await browser.post('/console/keys', { name: '   ', models: 'sora-2' });
    assert.equal(unnamed.statusCode, 400);
    assert.match(visibleText(unnamed.body), /Give the key a name\./);
    assert.match(unnamed.body, /value="sora-2" checked/, 'the ticked model stays ticked');
    const unknownModel = await browser.post('/console/keys', { name: 'typo', models: 'gpt-99' });
    assert.equal(unknownModel.statusCode, 400);
    assert.match(visibleText(unknownModel.body), /Choose models from the list\./);
    assert.match(unknownModel.body, /name="name" type="text" value="typo"/);
    for (const name of ['ab\u0000cd', 'tab\there\u0001', 'fg-prod\u202Eved']) {
      const refused = await browser.post('/console/keys', { name });
      assert.equal(refused.statusCode, 400, JSON.stringify(name));
      assert.match(visibleText(refused.body), /without control characters or direction overrides/);
    }
    // A form whose hidden reference went missing (a page saved without it, a hand-made post)
    // says what to do, rather than a 400 page with no error on it.
    const emptied = await browser.post('/console/keys', { name: 'no reference', reference: '' });
    assert.equal(emptied.statusCode, 400);
    assert.match(visibleText(emptied.body), /Reload the page and try again\./);
    // From a page without the form, the helper has no reference to send: the field is absent.
    assert.doesNotMatch((await browser.get('/console/usage')).body, /name="reference"/);
    const unreferenced = await browser.post('/console/keys', { name: 'no reference' });
    assert.equal(unreferenced.statusCode, 400);
    assert.match(visibleText(unreferenced.body), /Reload the page and try again\./);
    assert.equal(await harness.database.db.collection('api_keys').countDocuments({ account_id: accountId }), before);
  });

  it('deletes a key after a confirmation page; the key answers 401 on its very next call', async () => {
    const { plaintext } = await createThroughConsole({ name: 'short-lived' });
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(plaintext) })).statusCode, 200);
    const keyId = (await harness.database.db.collection('api_keys').findOne({ hash: hashApiKey(plaintext) }))!._id;

    const confirm = await browser.get(`/console/keys/${keyId}/revoke`);
    assert.equal(confirm.statusCode, 200);
    assert.match(visibleText(confirm.body), /Video tasks already submitted with it run to their end, and are billed as usual\./);
    assert.match(visibleText(confirm.body), /Delete key “short-lived”\?/);
    assert.match(visibleText(confirm.body), /answered 401/);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(plaintext) })).statusCode, 200, 'the confirmation page revokes nothing');

    const revoked = await browser.post(`/console/keys/${keyId}/revoke`, {});
    assert.equal(revoked.statusCode, 303);
    assert.equal(revoked.headers.location, '/console/keys?notice=revoked');
    const answer = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(plaintext) });
    assert.equal(answer.statusCode, 401);
    assert.equal(answer.json().error.type, 'authentication_error');

    const list = await browser.get('/console/keys?notice=revoked');
    assert.match(visibleText(list.body), /Key deleted\./);
    assert.match(list.body, new RegExp(`<tr data-key-id="${keyId}">[\\s\\S]*?badge revoked`));
    assert.ok(!list.body.includes(`/console/keys/${keyId}/revoke`), 'a revoked key has no delete link');
    // Nor limits: it makes no more calls to limit.
    const row = list.body.match(new RegExp(`<tr data-key-id="${keyId}">[\\s\\S]*?</tr>`))![0];
    assert.match(row, /data-testid="key-limits"><span class="muted">—<\/span><\/td>/);
    assert.doesNotMatch(row, /req\/min/);
    // The name field stops typing where the server would refuse the name.
    assert.match(list.body, /<input id="field-name" name="name" type="text" value=""[^>]* maxlength="200"/);
  });

  it("changes a key's models on a page of their own: the key's next call feels it, the key stays the same", async () => {
    const { plaintext } = await createThroughConsole({ name: 'narrowed', models: ['seedance-2.0'] });
    const keyId = (await harness.database.db.collection('api_keys').findOne({ hash: hashApiKey(plaintext) }))!._id;
    const modelStatus = async (model: string) => (await harness.app.inject({ method: 'GET', url: `/v1/models/${model}`, headers: bearer(plaintext) })).statusCode;
    assert.match((await browser.get('/console/keys')).body, new RegExp(`href="/console/keys/${keyId}/models"`));
    const page = await browser.get(`/console/keys/${keyId}/models`);
    assert.equal(page.statusCode, 200);
    assert.match(visibleText(page.body), /Models of key “narrowed”/);
    assert.match(page.body, /value="seedance-2.0" checked/, 'the key’s models are ticked');
    assert.ok(!/value="sora-2" checked/.test(page.body));

    assert.equal((await browser.post(`/console/keys/${keyId}/models`, { models: ['sora-2'] }, { csrf: false })).statusCode, 403, 'no CSRF token, no change');
    assert.equal(await modelStatus('sora-2'), 403);
    await browser.get(`/console/keys/${keyId}/models`);
    const saved = await browser.post(`/console/keys/${keyId}/models`, { models: ['sora-2', 'gpt-4o-mini'] });
    assert.deepEqual([saved.statusCode, saved.headers.location], [303, '/console/keys?notice=models']);
    assert.deepEqual([await modelStatus('sora-2'), await modelStatus('gpt-4o-mini'), await modelStatus('seedance-2.0')], [200, 200, 403]);
    const list = await browser.get('/console/keys?notice=models');
    assert.match(visibleText(list.body), /Models saved\./);
    assert.match(visibleText(new RegExp(`<tr data-key-id="${keyId}">[\\s\\S]*?</tr>`).exec(list.body)?.[0] ?? ''), /sora-2, gpt-4o-mini|gpt-4o-mini, sora-2/);

    const unknown = await browser.post(`/console/keys/${keyId}/models`, { models: ['sora-2', 'gpt-99'] }, { csrf: await browser.csrfToken(`/console/keys/${keyId}/models`) });
    assert.equal(unknown.statusCode, 400);
    assert.match(visibleText(unknown.body), /Choose models from the list\./);
    assert.equal(await modelStatus('gpt-4o-mini'), 200, 'a refused form changes nothing');

    await browser.get(`/console/keys/${keyId}/models`);
    const opened = await browser.post(`/console/keys/${keyId}/models`, {});
    assert.deepEqual([opened.statusCode, opened.headers.location], [303, '/console/keys?notice=every_model'], 'none ticked');
    assert.equal(await modelStatus('gpt-image-1'), 200, 'none ticked: every model');
    assert.match(visibleText((await browser.get('/console/keys?notice=every_model')).body), /none ticked, so the key may use every model/);
  });

  it("cannot see or delete another account's key", async () => {
    const other = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { authorization: `Bearer ${harness.config.ADMIN_TOKEN}` }, payload: { name: 'Other' } });
    const foreign = await createKey(harness.app, other.json().id, { name: 'theirs' });
    assert.equal((await browser.get(`/console/keys/${foreign.id}/revoke`)).statusCode, 404);
    await browser.get('/console/keys');
    const attempt = await browser.post(`/console/keys/${foreign.id}/revoke`, {});
    assert.equal(attempt.statusCode, 404);
    assert.equal((await browser.get(`/console/keys/${foreign.id}/models`)).statusCode, 404);
    // A deleted key of one's own: its models page says it is gone, and changes nothing.
    const { plaintext: deletedKey } = await createThroughConsole({ name: 'deleted', models: ['sora-2'] });
    const deletedId = (await harness.database.db.collection('api_keys').findOne({ hash: hashApiKey(deletedKey) }))!._id;
    await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${deletedId}`, headers: { authorization: `Bearer ${harness.config.ADMIN_TOKEN}` } });
    assert.equal((await browser.get(`/console/keys/${deletedId}/models`)).headers.location, '/console/keys?notice=key_gone');
    assert.match(visibleText((await browser.get('/console/keys?notice=key_gone')).body), /That key is deleted: it uses no model, and its models were not changed\./);
    assert.equal((await browser.post(`/console/keys/${deletedId}/models`, { models: 'gpt-4o-mini' })).headers.location, '/console/keys?notice=key_gone');
    assert.equal(await harness.database.db.collection('api_key_models').countDocuments({ _id: deletedId as never }), 0);
    await browser.get('/console/keys');
    assert.equal((await browser.post(`/console/keys/${foreign.id}/models`, { models: 'sora-2' })).statusCode, 404);
    assert.match(attempt.headers['content-type'] as string, /^text\/html/);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(foreign.key) })).statusCode, 200);
    assert.ok(!(await browser.get('/console/keys')).body.includes('theirs'));
  });

  it('pages an account with many keys, 100 at a time, newest first, each key once (keys made in one millisecond included)', async () => {
    const email = `${uniqueName('many-keys')}@example.com`;
    const many = (await createAccountWithSignIn(harness.app, { name: 'Many Keys', balance_usd: 1, console_email: email, console_password: PASSWORD })).id;
    const reader = new ConsoleClient(harness.app);
    assert.equal((await reader.signIn(email, PASSWORD)).statusCode, 303);
    // 230 keys: the older 200 all made in the same millisecond, so only the id orders them.
    const sameMoment = new Date('2026-01-02T03:04:05.678Z');
    const documents = Array.from({ length: 230 }, (_, index) => {
      const hash = hashApiKey(`fg_many_${many}_${index}`);
      return { _id: `key_${hash.slice(0, 24)}`, account_id: many, name: `bulk ${index}`, hash, prefix: 'fg_', last4: String(index).padStart(4, '0'), models: null, created_at: index < 200 ? sameMoment : new Date(sameMoment.getTime() + index), revoked_at: null, last_used_at: null };
    });
    await harness.database.db.collection('api_keys').insertMany(documents as never[]);
    const newestFirst = [...documents].sort((a, b) => b.created_at.getTime() - a.created_at.getTime() || (a._id < b._id ? 1 : -1)).map((key) => key._id);

    const seen: string[] = [];
    let url: string | undefined = '/console/keys';
    const pageSizes: number[] = [];
    while (url) {
      const page = await reader.get(url);
      assert.equal(page.statusCode, 200);
      const ids = [...page.body.matchAll(/<tr data-key-id="([^"]+)">/g)].map((match) => match[1]!);
      pageSizes.push(ids.length);
      seen.push(...ids);
      assert.equal(page.body.includes('← Newest keys'), pageSizes.length > 1, 'a way back to the newest keys from later pages');
      url = /href="(\/console\/keys\?after=[^"]+)" rel="next"/.exec(page.body)?.[1];
    }
    assert.deepEqual(pageSizes, [100, 100, 30]);
    assert.deepEqual(seen, newestFirst);

    // Another account's key id as the cursor shows nothing of it: the list starts from the newest.
    const foreign = await createKey(harness.app, accountId, { name: 'not theirs' });
    const fromForeign = await reader.get(`/console/keys?after=${foreign.id}`);
    assert.ok(!fromForeign.body.includes('not theirs'));
    assert.equal([...fromForeign.body.matchAll(/<tr data-key-id="([^"]+)">/g)][0]?.[1], newestFirst[0]);
    assert.ok(!fromForeign.body.includes('← Newest keys'), 'the newest keys are this page: no link back to it');
    assert.ok(!(await reader.get('/console/keys?after=garbage')).body.includes('← Newest keys'));
    // A key on a later page opens its delete confirmation as any other.
    assert.equal((await reader.get(`/console/keys/${newestFirst[229]}/revoke`)).statusCode, 200);

    // Usage lists the 100 keys that spent the most, counts the rest, and totals them all: the
    // whole list made a 600 KB page at 1,200 keys.
    const spender = newestFirst[229]!;
    await new UsageStore(harness.database.db).record({ _id: uniqueName('usage'), account_id: many, key_id: spender, model: 'gpt-4o-mini', kind: 'chat', requests: 3, video_seconds: 0, input_tokens: 30, output_tokens: 60, images: 0, spend_micros: 1_234_567 });
    const usage = await reader.get('/console/usage');
    const rows = [...usage.body.matchAll(/<tr data-key-id="([^"]+)">/g)].map((match) => match[1]!);
    assert.equal(rows.length, 100);
    assert.equal(rows[0], spender, 'the key that spent comes first, though it is the oldest');
    assert.match(visibleText(usage.body), /130 more keys, which spent less, are not listed; the total counts them\./);
    assert.match(usage.body, /<tr class="total"><td>Total<\/td><td class="num">3<\/td>/);
    assert.equal([...usage.body.matchAll(/<option value="key_/g)].length, 100, 'the key menu lists the same keys');
    // A key not listed can still be chosen by its id (the menu keeps it).
    const quiet = newestFirst[228]!;
    assert.ok(!rows.includes(quiet));
    const narrowed = await reader.get(`/console/usage?key=${quiet}`);
    assert.deepEqual([...narrowed.body.matchAll(/<tr data-key-id="([^"]+)">/g)].map((match) => match[1]), [quiet]);
    assert.match(narrowed.body, new RegExp(`<option value="${quiet}" selected>`));
    // So does the operator's page of the account.
    const operator = new ConsoleClient(harness.app, '198.51.100.77');
    assert.equal((await operator.signInAsOperator()).statusCode, 303);
    const accountPage = await operator.get(`/console/operator/accounts/${many}`);
    const operatorRows = [...accountPage.body.matchAll(/<tr data-key-id="([^"]+)">/g)].map((match) => match[1]!);
    assert.equal(operatorRows.length, 100);
    assert.equal(operatorRows[0], spender);
    assert.match(visibleText(accountPage.body), /Keys 1 to 100 of 230, those that spent the most first\./);
    // Every key is reachable: the pages by spend list each once (a review could not reach a
    // restricted key past the first 100 to change its limits).
    const operatorSeen = [...operatorRows];
    let next = /href="([^"]+)" rel="next"/.exec(accountPage.body)?.[1]?.replaceAll('&amp;', '&');
    const pageTexts: string[] = [];
    while (next) {
      const page = await operator.get(next);
      assert.equal(page.statusCode, 200);
      operatorSeen.push(...[...page.body.matchAll(/<tr data-key-id="([^"]+)">/g)].map((match) => match[1]!));
      pageTexts.push(/Keys [\d,]*\d to [\d,]*\d of [\d,]*\d/.exec(visibleText(page.body))?.[0] ?? '');
      assert.match(page.body, /rel="prev">← Keys that spent more</);
      next = /href="([^"]+)" rel="next"/.exec(page.body)?.[1]?.replaceAll('&amp;', '&');
    }
    assert.deepEqual(pageTexts, ['Keys 101 to 200 of 230', 'Keys 201 to 230 of 230']);
    assert.equal(operatorSeen.length, 230);
    assert.deepEqual([...operatorSeen].sort(), [...newestFirst].sort());
    const pastTheEnd = await operator.get(`/console/operator/accounts/${many}?keys_page=99`);
    assert.match(visibleText(pastTheEnd.body), /Keys 201 to 230 of 230/, 'a page past the last shows the last');
  });
});
