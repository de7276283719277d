import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';

describe('GET /v1/models', () => {
  let harness: TestApp;
  let accountId: string;
  before(async () => {
    harness = await startTestApp('models');
    accountId = (await createAccount(harness.app, { name: 'models' })).id;
  });
  after(() => harness.close());

  it('lists every catalog model in the OpenAI list shape for an unrestricted key', async () => {
    const key = (await createKey(harness.app, accountId)).key;
    const response = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    assert.equal(response.statusCode, 200);
    const body = response.json();
    assert.equal(body.object, 'list');
    const ids = body.data.map((model: { id: string }) => model.id).sort();
    assert.deepEqual(ids, ['gpt-4o-mini', 'gpt-image-1', 'seedance-1.0-pro', 'seedance-2.0', 'sora-2']);
    for (const model of body.data) {
      assert.equal(model.object, 'model');
      assert.ok(Number.isInteger(model.created));
      assert.equal(typeof model.owned_by, 'string');
      assert.deepEqual(Object.keys(model).sort(), ['created', 'id', 'object', 'owned_by']);
    }
  });

  it('lists only the permitted models for a restricted key, and hides the others from GET /v1/models/{id}', async () => {
    const key = (await createKey(harness.app, accountId, { name: 'video only', models: ['seedance-2.0'] })).key;
    const listed = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    assert.deepEqual(listed.json().data.map((model: { id: string }) => model.id), ['seedance-2.0']);
    const allowed = await harness.app.inject({ method: 'GET', url: '/v1/models/seedance-2.0', headers: bearer(key) });
    assert.equal(allowed.statusCode, 200);
    assert.equal(allowed.json().id, 'seedance-2.0');
    const hidden = await harness.app.inject({ method: 'GET', url: '/v1/models/gpt-4o-mini', headers: bearer(key) });
    assert.equal(hidden.statusCode, 404);
    assert.equal(hidden.json().error.type, 'not_found_error');
  });
});
