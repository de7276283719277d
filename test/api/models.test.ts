import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { scratchDirectory } from '../helpers/scratch-directory.ts';
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
      assert.deepEqual(Object.keys(model).sort(), ['created', 'id', 'kind', 'object', 'owned_by']);
    }
    const kinds = Object.fromEntries(body.data.map((model: { id: string; kind: string }) => [model.id, model.kind]));
    assert.deepEqual(kinds, { 'gpt-4o-mini': 'chat', 'gpt-image-1': 'image', 'seedance-1.0-pro': 'video', 'seedance-2.0': 'video', 'sora-2': 'video' });
  });

  it('lists only the permitted models for a restricted key, and answers GET /v1/models/{id} of the others with 403 (spec 5.6)', async () => {
    const key = (await createKey(harness.app, accountId, { name: 'video only', models: ['seedance-2.0'] })).key;
    const listed = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    assert.deepEqual(listed.json().data.map((model: { id: string }) => model.id), ['seedance-2.0']);
    const allowed = await harness.app.inject({ method: 'GET', url: '/v1/models/seedance-2.0', headers: bearer(key) });
    assert.equal(allowed.statusCode, 200);
    assert.equal(allowed.json().id, 'seedance-2.0');
    const hidden = await harness.app.inject({ method: 'GET', url: '/v1/models/gpt-4o-mini', headers: bearer(key) });
    assert.equal(hidden.statusCode, 403);
    assert.deepEqual([hidden.json().error.type, hidden.json().error.code, hidden.json().error.param], ['permission_error', 'model_not_allowed', 'model']);
  });
});

describe('GET /v1/models/{model} for any id', () => {
  let harness: TestApp;
  let key: string;
  before(async () => {
    // The local catalog plus a model whose id has slashes, as vLLM and Hugging Face name them.
    const catalog = JSON.parse(await readFile('config/catalog.local.json', 'utf8')) as { models: Array<Record<string, unknown>> };
    const chat = catalog.models.find((model) => model.id === 'gpt-4o-mini')!;
    catalog.models.push({ ...chat, id: 'meta-llama/Llama-3-8B', owned_by: 'meta' });
    const file = path.join(scratchDirectory('catalog'), 'catalog.json');
    await writeFile(file, JSON.stringify(catalog));
    harness = await startTestApp('models-any-id', { CATALOG_FILE: file });
    key = (await createKey(harness.app, (await createAccount(harness.app, { name: 'ids' })).id)).key;
  });
  after(() => harness.close());

  it('reads an id with slashes sent as is (the Python client) or encoded (the Node client)', async () => {
    for (const url of ['/v1/models/meta-llama/Llama-3-8B', '/v1/models/meta-llama%2FLlama-3-8B']) {
      const response = await harness.app.inject({ method: 'GET', url, headers: bearer(key) });
      assert.equal(response.statusCode, 200, `${url}: ${response.body}`);
      assert.deepEqual([response.json().id, response.json().owned_by], ['meta-llama/Llama-3-8B', 'meta'], url);
    }
    const missing = await harness.app.inject({ method: 'GET', url: '/v1/models/meta-llama/Llama-9', headers: bearer(key) });
    assert.equal(missing.statusCode, 404);
    assert.match(missing.json().error.message, /The model 'meta-llama\/Llama-9' does not exist/);
  });

  it('answers an id no model has with 404 however long, quoting at most 100 characters of it', async () => {
    for (const long of ['x'.repeat(1_000), 'x'.repeat(5_000)]) {
      for (const url of [`/v1/models/${long}`, `/v1/video/generations/${long}`, `/v1/video/generations/task_${long}/content`]) {
        const response = await harness.app.inject({ method: 'GET', url, headers: bearer(key) });
        assert.equal(response.statusCode, 404, `${url.slice(0, 40)}… (${long.length})`);
        assert.equal(response.json().error.type, 'not_found_error');
        assert.ok(response.json().error.message.length < 200, response.json().error.message);
      }
    }
    // The key is checked first, however long the id: a 401 without one, and the route's own code.
    assert.equal((await harness.app.inject({ method: 'GET', url: `/v1/models/${'x'.repeat(10_000)}` })).statusCode, 401);
    const longTask = await harness.app.inject({ method: 'GET', url: `/v1/video/generations/${'x'.repeat(10_000)}`, headers: bearer(key) });
    assert.equal(longTask.json().error.code, 'task_not_found');
    const empty = await harness.app.inject({ method: 'GET', url: '/v1/video/generations/', headers: bearer(key) });
    assert.equal(empty.statusCode, 404);
    assert.equal(empty.json().error.code, 'task_not_found');
  });
});
