import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';

// An operator changes what a key may use without replacing the key (its callers keep their
// configuration): GET /admin/keys/{id} reads it, PUT /admin/keys/{id}/models changes it.

describe('admin API: a key by id, and its models', () => {
  let harness: TestApp;
  let accountId: string;
  before(async () => {
    harness = await startTestApp('key-models');
    accountId = (await createAccount(harness.app, { name: 'models' })).id;
  });
  after(() => harness.close());

  const readKey = (id: string) => harness.app.inject({ method: 'GET', url: `/admin/keys/${id}`, headers: adminHeaders });
  const putModels = (id: string, payload: unknown) => harness.app.inject({ method: 'PUT', url: `/admin/keys/${id}/models`, headers: adminHeaders, payload: payload as object });
  const modelStatus = async (key: string, model: string) => (await harness.app.inject({ method: 'GET', url: `/v1/models/${model}`, headers: bearer(key) })).statusCode;

  it('reads a key by id with its account, models and own limits', async () => {
    const key = await createKey(harness.app, accountId, { name: 'reader', models: ['sora-2'] });
    await harness.app.inject({ method: 'PUT', url: `/admin/keys/${key.id}/rate-limits`, headers: adminHeaders, payload: { requests_per_minute: 30 } });
    const read = await readKey(key.id);
    assert.equal(read.statusCode, 200);
    const body = read.json();
    assert.deepEqual(
      { id: body.id, account_id: body.account_id, name: body.name, models: body.models, status: body.status, rate_limits: body.rate_limits },
      { id: key.id, account_id: accountId, name: 'reader', models: ['sora-2'], status: 'active', rate_limits: { requests_per_minute: 30, tokens_per_minute: null } },
    );
    assert.equal(body.key, undefined, 'the plaintext is shown only at creation');
    assert.equal(body.hash, undefined);
    const missing = await readKey('key_none');
    assert.deepEqual([missing.statusCode, missing.json().error.code], [404, 'resource_not_found']);
    assert.equal((await harness.app.inject({ method: 'GET', url: `/admin/keys/${key.id}` })).statusCode, 401);
  });

  it('changes the models a key may use, effective on its next call, the key itself unchanged', async () => {
    const key = await createKey(harness.app, accountId, { name: 'video only', models: ['seedance-2.0'] });
    assert.equal(await modelStatus(key.key, 'gpt-4o-mini'), 403);
    const changed = await putModels(key.id, { models: ['gpt-4o-mini', 'seedance-2.0'] });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.deepEqual([changed.json().models, changed.json().status], [['gpt-4o-mini', 'seedance-2.0'], 'active']);
    assert.equal(await modelStatus(key.key, 'gpt-4o-mini'), 200, 'a model given is usable at once');
    assert.deepEqual((await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key.key) })).json().data.map((model: { id: string }) => model.id).sort(), ['gpt-4o-mini', 'seedance-2.0']);
    assert.equal((await putModels(key.id, { models: ['gpt-4o-mini'] })).statusCode, 200);
    assert.equal(await modelStatus(key.key, 'seedance-2.0'), 403, 'a model taken away is refused at once');
    assert.equal((await putModels(key.id, { models: null })).json().models, null);
    assert.equal(await modelStatus(key.key, 'sora-2'), 200, 'null: every model');
    // The account's page and the key's own read agree.
    const account = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${accountId}`, headers: adminHeaders })).json();
    assert.equal(account.keys.find((listed: { id: string }) => listed.id === key.id).models, null);
    assert.equal((await readKey(key.id)).json().models, null);
  });

  it('refuses unknown models, an empty list, a missing field, an unknown key and a revoked one', async () => {
    const key = await createKey(harness.app, accountId, { name: 'refusals', models: ['sora-2'] });
    const unknown = await putModels(key.id, { models: ['sora-2', 'gpt-9', 'dall-e-9'] });
    assert.deepEqual([unknown.statusCode, unknown.json().error.param], [400, 'models']);
    assert.match(unknown.json().error.message, /gpt-9, dall-e-9/);
    for (const payload of [{ models: [] }, {}, { models: 'sora-2' }, { models: ['sora-2'], name: 'renamed' }]) {
      const refused = await putModels(key.id, payload);
      assert.equal(refused.statusCode, 400, `${JSON.stringify(payload)}: ${refused.body}`);
    }
    assert.match((await putModels(key.id, { models: [] })).json().error.message, /at least one model, or be null for every model/);
    assert.equal((await putModels('key_none', { models: ['sora-2'] })).statusCode, 404);
    assert.equal((await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${key.id}`, headers: adminHeaders })).statusCode, 200);
    const revoked = await putModels(key.id, { models: null });
    assert.deepEqual([revoked.statusCode, revoked.json().error.type], [409, 'conflict_error']);
    assert.match(revoked.json().error.message, /is revoked: it uses no model, and its models were not changed/);
    // Nothing changed by the refusals.
    assert.deepEqual((await readKey(key.id)).json().models, ['sora-2']);
    assert.equal(await modelStatus(key.key, 'sora-2'), 401);
  });
});
