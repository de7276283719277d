import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';

// Browser apps call /v1 with a bearer key, as they call OpenAI's API (which answers CORS): a
// preflight is answered without a key, answers carry Access-Control-Allow-Origin and expose the
// headers OpenAI's clients read. /admin and /console (a token, cookies) do not take part.

const ORIGIN = 'http://localhost:3000';

describe('CORS on the OpenAI-compatible API', () => {
  let harness: TestApp;
  let key: string;
  before(async () => {
    harness = await startTestApp('cors');
    key = (await createKey(harness.app, (await createAccount(harness.app, { name: 'browser app', balance_usd: 1 })).id)).key;
  });
  after(() => harness.close());

  it('answers a preflight without a key, for the methods and headers the browser asks', async () => {
    const preflight = await harness.app.inject({
      method: 'OPTIONS',
      url: '/v1/chat/completions',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-stainless-os' },
    });
    assert.equal(preflight.statusCode, 204, preflight.body);
    assert.equal(preflight.headers['access-control-allow-origin'], '*');
    assert.equal(preflight.headers['access-control-allow-methods'], 'GET, POST, DELETE');
    assert.equal(preflight.headers['content-length'], '0');
    assert.equal(preflight.headers['access-control-allow-headers'], 'authorization,content-type,x-stainless-os');
    assert.equal(preflight.headers['access-control-max-age'], '600');
  });

  it('lets the page read the answer and its headers, refusals included', async () => {
    const listed = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: { ...bearer(key), origin: ORIGIN } });
    assert.equal(listed.statusCode, 200);
    assert.equal(listed.headers['access-control-allow-origin'], '*');
    const exposed = String(listed.headers['access-control-expose-headers']).split(/,\s*/);
    for (const header of ['x-request-id', 'retry-after', 'retry-after-ms', 'x-ratelimit-remaining-requests']) assert.ok(exposed.includes(header), header);
    const refused = await harness.app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: 'Bearer fg_wrong', origin: ORIGIN } });
    assert.equal(refused.statusCode, 401);
    assert.equal(refused.headers['access-control-allow-origin'], '*', 'a page can read why it was refused');
  });

  it('answers any other OPTIONS as before: 405 with Allow, or 404', async () => {
    const plain = await harness.app.inject({ method: 'OPTIONS', url: '/v1/chat/completions' });
    assert.equal(plain.statusCode, 405);
    assert.equal(plain.headers.allow, 'POST');
    const nowhere = await harness.app.inject({ method: 'OPTIONS', url: '/v1/nope', headers: { 'access-control-request-method': 'POST' } });
    assert.equal(nowhere.statusCode, 404);
    // Request headers that are not a list of header names are not echoed back.
    const odd = await harness.app.inject({ method: 'OPTIONS', url: '/v1/models', headers: { origin: ORIGIN, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization\r\nx: y' } });
    assert.equal(odd.statusCode, 204);
    assert.equal(odd.headers['access-control-allow-headers'], undefined);
  });

  it('leaves the admin API and the console out', async () => {
    for (const url of ['/admin/accounts', '/console/sign-in']) {
      const preflight = await harness.app.inject({ method: 'OPTIONS', url, headers: { origin: ORIGIN, 'access-control-request-method': 'POST' } });
      assert.equal(preflight.headers['access-control-allow-origin'], undefined, url);
      assert.notEqual(preflight.statusCode, 204, url);
    }
    const admin = await harness.app.inject({ method: 'GET', url: '/admin/accounts/acct_nothere', headers: { ...adminHeaders, origin: ORIGIN } });
    assert.equal(admin.headers['access-control-allow-origin'], undefined);
  });
});
