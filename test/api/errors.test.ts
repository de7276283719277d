import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/engines.ts';

function assertErrorShape(body: unknown, status: number, type: string) {
  const error = (body as { error: Record<string, unknown> }).error;
  assert.equal(typeof error.message, 'string', `status ${status}`);
  assert.ok((error.message as string).length > 0);
  assert.equal(error.type, type);
  assert.equal(typeof error.code, 'string');
}

describe('errors in the shape of spec section 7', () => {
  let harness: TestApp;
  let key: string;
  before(async () => {
    harness = await startTestApp('errors', { BODY_LIMIT_BYTES: '2048' });
    key = (await createKey(harness.app, (await createAccount(harness.app, { name: 'errors' })).id)).key;
  });
  after(() => harness.close());

  it('404 for unknown routes, inside and outside /v1', async () => {
    for (const [url, headers] of [['/nope', {}], ['/v1/nope', bearer(key)], ['/v2/models', bearer(key)]] as const) {
      const response = await harness.app.inject({ method: 'GET', url, headers });
      assert.equal(response.statusCode, 404, url);
      assertErrorShape(response.json(), 404, 'not_found_error');
      assert.equal(response.json().error.code, 'route_not_found');
      // It names the paths there are, not a document the caller may not have.
      assert.match(response.json().error.message, /\/v1\/models, \/v1\/chat\/completions, \/v1\/images\/generations and \/v1\/video\/generations/);
    }
    // Under /admin it names the admin API's paths instead.
    const admin = await harness.app.inject({ method: 'GET', url: '/admin/acounts', headers: adminHeaders });
    assert.equal(admin.statusCode, 404);
    assert.match(admin.json().error.message, /^No route for GET \/admin\/acounts\. The admin API's paths are \/admin\/accounts\/\{id\}/);
  });

  it('404 naming the missing id for a trailing slash after /v1/models or /v1/video/generations', async () => {
    const model = await harness.app.inject({ method: 'GET', url: '/v1/models/', headers: bearer(key) });
    assert.equal(model.statusCode, 404);
    assert.deepEqual([model.json().error.code, model.json().error.message], ['model_not_found', 'No model id in the path: GET /v1/models/{model} reads a model, GET /v1/models lists them.']);
    const task = await harness.app.inject({ method: 'GET', url: '/v1/video/generations/', headers: bearer(key) });
    assert.equal(task.statusCode, 404);
    assert.deepEqual([task.json().error.code, task.json().error.message], ['task_not_found', 'No task id in the path: GET /v1/video/generations/{task_id} reads a task, GET /v1/video/generations lists them.']);
  });

  it('400 invalid_json for a malformed body', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: '{"name": "half',
    });
    assert.equal(response.statusCode, 400);
    assertErrorShape(response.json(), 400, 'invalid_request_error');
    assert.equal(response.json().error.code, 'invalid_json');
  });

  it('400 empty_body for an empty JSON body', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: '',
    });
    assert.equal(response.statusCode, 400);
    assert.equal(response.json().error.code, 'empty_body');
  });

  it('takes an empty body labelled JSON on a route that reads none (some clients label every request)', async () => {
    const response = await harness.app.inject({
      method: 'DELETE',
      url: '/admin/keys/key_none_such',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: '',
    });
    // The route ran: the key is unknown, not the body refused.
    assert.equal(response.statusCode, 404);
    assert.equal(response.json().error.type, 'not_found_error');
  });

  it('413 for a body over the limit, naming the limit', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(4096) }),
    });
    assert.equal(response.statusCode, 413);
    assertErrorShape(response.json(), 413, 'invalid_request_error');
    assert.match(response.json().error.message, /2048 bytes/);
  });

  it('415 for a body that is not JSON', async () => {
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const response = await harness.app.inject({
        method: 'POST',
        url: '/admin/accounts',
        headers: { ...adminHeaders, 'content-type': contentType },
        payload: 'name=x',
      });
      assert.equal(response.statusCode, 415, contentType);
      assertErrorShape(response.json(), 415, 'invalid_request_error');
    }
  });

  it('400 naming the offending field for a validation failure', async () => {
    const response = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: adminHeaders, payload: { name: 5 } });
    assert.equal(response.statusCode, 400);
    assert.equal(response.json().error.param, 'name');
    assert.match(response.json().error.message, /'name'/);
  });

  it('400 saying a body must be a JSON object, and naming a field the endpoint does not take', async () => {
    for (const [payload, what] of [['[1]', 'an array'], ['"hello"', 'a string'], ['42', 'a number'], ['null', 'null']] as const) {
      const response = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { ...adminHeaders, 'content-type': 'application/json' }, payload });
      assert.equal(response.statusCode, 400, payload);
      assert.equal(response.json().error.message, `The request body must be a JSON object, not ${what}.`);
    }
    const unknown = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: adminHeaders, payload: { name: 'x', colour: 'blue' } });
    assert.equal(unknown.statusCode, 400);
    assert.deepEqual([unknown.json().error.param, unknown.json().error.message], ['colour', "Unknown field 'colour': this endpoint does not take it."]);
  });

  it('400 for a prototype-poisoning body, and the process stays healthy', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: '{"name":"x","__proto__":{"admin":true}}',
    });
    assert.equal(response.statusCode, 400);
    assertErrorShape(response.json(), 400, 'invalid_request_error');
    assert.equal((await harness.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });

  it("returns the request id in x-request-id: the caller's own when it reads as an id, the gateway's otherwise", async () => {
    const idOf = async (sent: string) => (await harness.app.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': sent } })).headers['x-request-id'];
    for (const sent of ['req_from_client', '4bf92f3577b34da6a3ce929d0e0e4736', '0f8fad5b-d9cb-469f-a165-70867728950e', 'a'.repeat(128)]) assert.equal(await idOf(sent), sent);
    for (const sent of ['a'.repeat(129), 'two words', '"quoted"', 'line\u2028break', '']) assert.match(String(await idOf(sent)), /^req_[\w-]{16,}$/, JSON.stringify(sent));
  });
});

describe('server errors', () => {
  it('a 500 names the request id and nothing of the internals', async () => {
    const harness = await startTestApp('leak');
    const key = (await createKey(harness.app, (await createAccount(harness.app, { name: 'leak' })).id)).key;
    const databaseName = harness.database.db.databaseName;
    await harness.database.client.close(); // the store disappears under the running api
    try {
      const response = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
      assert.equal(response.statusCode, 500);
      const error = response.json().error;
      assert.equal(error.type, 'server_error');
      assert.match(error.message, /request id req_/);
      assert.doesNotMatch(response.body, /Mongo|topology|stack|\.ts|closed/i);
    } finally {
      await harness.app.close();
      await harness.temporal.close();
      const cleanup = await testDatabase('leak-cleanup');
      await cleanup.client.db(databaseName).dropDatabase();
      await cleanup.drop();
    }
  });
});

describe('health and readiness', () => {
  it('/healthz is 200; /readyz is 200 with both engines up', async () => {
    const harness = await startTestApp('ready');
    try {
      assert.deepEqual((await harness.app.inject({ method: 'GET', url: '/healthz' })).json(), { status: 'ok' });
      const ready = await harness.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(ready.statusCode, 200, ready.body);
      assert.deepEqual(ready.json().checks, { database: 'ok', temporal: 'ok' });
    } finally {
      await harness.close();
    }
  });

  it('/readyz is 503 in the error shape when Temporal is unreachable', async () => {
    const harness = await startTestApp('unready', { TEMPORAL_ADDRESS: '127.0.0.1:1' });
    try {
      const response = await harness.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(response.statusCode, 503);
      assertErrorShape(response.json(), 503, 'service_unavailable_error');
      assert.equal(response.json().checks.database, 'ok');
      assert.match(response.json().checks.temporal, /^unavailable/);
    } finally {
      await harness.close();
    }
  });
});
