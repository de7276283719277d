import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { structureBeyond } from '../../api/plugins/json-body.ts';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';

// Malformed and hostile bodies answer 4xx in the spec's error shape, never 5xx, and leave the
// process healthy.

describe('hostile request bodies', () => {
  let harness: TestApp;
  let headers: Record<string, string>;
  before(async () => {
    harness = await startTestApp('hostile');
    const key = (await createKey(harness.app, (await createAccount(harness.app, { name: 'hostile', balance_usd: 5 })).id)).key;
    headers = { ...bearer(key), 'content-type': 'application/json' };
  });
  after(() => harness.close());

  const post = (payload: string | Buffer, extraHeaders: Record<string, string> = {}) =>
    harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: { ...headers, ...extraHeaders }, payload });

  const cases: Array<[string, () => string | Buffer, number, RegExp]> = [
    ['truncated JSON', () => '{"model":"seedance-2.0","prompt":"x"', 400, /not valid JSON/],
    ['a __proto__ key', () => '{"model":"seedance-2.0","prompt":"x","__proto__":{"admin":true}}', 400, /not valid JSON/],
    ['a constructor.prototype key', () => '{"model":"seedance-2.0","prompt":"x","constructor":{"prototype":{"admin":true}}}', 400, /not valid JSON/],
    ['invalid UTF-8', () => Buffer.concat([Buffer.from('{"model":"seedance-2.0","prompt":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), 400, /not valid UTF-8/],
    ['a 90,000-element array', () => JSON.stringify({ model: 'seedance-2.0', prompt: 'x', metadata: { content: Array(90_000).fill(1) } }), 400, /metadata\.content/],
    // Parsing is the cost: 20 MB of these held the event loop 3.4 s. Counted before the parse.
    ['150,000 empty objects', () => `{"model":"seedance-2.0","prompt":"x","metadata":{"x":[${'{},'.repeat(149_999)}{}]}}`, 413, /holds more than 100000 JSON values/],
    // Refused on the look before the parse (the body is long enough), in the words the parse gave.
    ['100,000 levels of nesting', () => `{"model":"seedance-2.0","prompt":"x","metadata":${'['.repeat(100_000)}${']'.repeat(100_000)}}`, 400, /more than 128 levels deep/],
    ['a JSON array instead of an object', () => '[1,2,3]', 400, /./],
    ['a JSON string instead of an object', () => '"hello"', 400, /./],
  ];
  for (const [label, payload, status, message] of cases) {
    it(`${label} → ${status}`, async () => {
      const response = await post(payload());
      assert.equal(response.statusCode, status, response.body);
      const error = response.json().error;
      assert.equal(error.type, 'invalid_request_error');
      assert.match(error.message, message);
    });
  }

  // 5,000 levels parse, but recursing over them (forwarding the body upstream) overflowed the
  // stack: a 500, which clients retry. 128 levels are taken, 129 are not.
  const nested = (levels: number) => `${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}`;
  for (const [url, fields] of [
    ['/v1/chat/completions', '"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]'],
    ['/v1/images/generations', '"model":"gpt-image-1","prompt":"a fox"'],
    ['/v1/video/generations', '"model":"seedance-2.0","prompt":"x"'],
  ] as const) {
    it(`a pass-through field nested 5,000 levels deep on ${url} → 400`, async () => {
      const response = await harness.app.inject({ method: 'POST', url, headers, payload: `{${fields},"vendor_knob":${nested(5_000)}}` });
      assert.equal(response.statusCode, 400, response.body);
      assert.match(response.json().error.message, /more than 128 levels deep/);
      const deepest = await harness.app.inject({ method: 'POST', url, headers, payload: `{${fields},"vendor_knob":${nested(128)}}` });
      assert.doesNotMatch(deepest.body, /levels deep/);
      const tooDeep = await harness.app.inject({ method: 'POST', url, headers, payload: `{${fields},"vendor_knob":${nested(129)}}` });
      assert.match(tooDeep.json().error.message, /more than 128 levels deep/);
    });
  }

  it('counts values outside strings only: a long prompt of commas and brackets, escaped quotes and all, is read', async () => {
    const punctuation = ',[{\\",'.repeat(60_000);
    const prompt = JSON.stringify(punctuation);
    const body = `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":${prompt}}]}`;
    assert.ok(body.length > 300_000);
    assert.equal(structureBeyond(body, 100_000, 128), undefined);
    const read = await harness.app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload: body });
    assert.doesNotMatch(read.body, /JSON values|not valid JSON/);
    // The same characters as structure are counted: one past the limit is too many.
    assert.equal(structureBeyond(`[${'0,'.repeat(100_000)}0]`, 100_000, 128), 'values');
    assert.equal(structureBeyond(`[${'0,'.repeat(99_999)}0]`, 100_000, 128), undefined);
    // A quote after an even run of backslashes ends its string; after an odd one it does not.
    const items = `${'[],'.repeat(60_000)}[]`;
    assert.equal(structureBeyond(`["\\\\",${items}]`, 100_000, 128), 'values');
    assert.equal(structureBeyond(`["\\\\\\",${items}"]`, 100_000, 128), undefined);
    // Strings with and without escapes, one after another, are skipped whole; what follows them counts.
    const strings = `"${',[{'.repeat(50_000)}","a\\"${',[{'.repeat(50_000)}","${',[{'.repeat(50_000)}\\\\"`;
    assert.equal(structureBeyond(`[${strings}]`, 100_000, 128), undefined);
    assert.equal(structureBeyond(`[${strings},${items}]`, 100_000, 128), 'values');
    // Nesting past the limit is found on the way, before the parse; within it is not.
    const padded = (levels: number) => `${'['.repeat(levels)}${' '.repeat(100_000)}${']'.repeat(levels)}`;
    assert.equal(structureBeyond(padded(129), 100_000, 128), 'depth');
    assert.equal(structureBeyond(padded(128), 100_000, 128), undefined);
    // An unterminated string is the parser's to refuse.
    assert.equal(structureBeyond(`{"a":"${'['.repeat(200_000)}`, 100_000, 128), undefined);
  });

  it('no body at all, or a compressed one, is refused in words that say so', async () => {
    const { authorization } = headers;
    const empty = await harness.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization } });
    assert.equal(empty.statusCode, 400, empty.body);
    assert.equal(empty.json().error.message, 'The request body is empty; send a JSON object with Content-Type: application/json.');
    assert.equal(empty.json().error.code, 'empty_body');
    const gzipped = await post(gzipSync('{"model":"seedance-2.0","prompt":"x"}'), { 'content-encoding': 'gzip' });
    assert.equal(gzipped.statusCode, 415, gzipped.body);
    assert.match(gzipped.json().error.message, /Content-Encoding 'gzip' is not supported/);
  });

  it('a body of exactly the limit is read; one byte more is a 413', async () => {
    const limit = harness.config.BODY_LIMIT_BYTES;
    const frame = '{"model":"seedance-2.0","prompt":""}';
    const atLimit = `{"model":"seedance-2.0","prompt":"${'x'.repeat(limit - frame.length)}"}`;
    assert.equal(Buffer.byteLength(atLimit), limit);
    const read = await post(atLimit);
    assert.equal(read.statusCode, 400, 'read and validated (the prompt is too long), not refused for size');
    assert.equal(read.json().error.param, 'prompt');
    const over = await post(`${atLimit} `);
    assert.equal(over.statusCode, 413);
    assert.equal(over.json().error.type, 'invalid_request_error');
  });

  it('JSON labelled with a charset other than UTF-8 → 415 naming it; charset=utf-8 is read', async () => {
    const body = JSON.stringify({ model: 'seedance-2.0', prompt: 'x', seconds: 'seven' });
    for (const contentType of ['application/json; charset=iso-8859-1', 'application/json;charset="UTF-16"']) {
      const refused = await post(body, { 'content-type': contentType });
      assert.equal(refused.statusCode, 415, contentType);
      assert.match(refused.json().error.message, /^JSON bodies are UTF-8; this one is labelled charset=(iso-8859-1|utf-16)\. Send it as UTF-8\.$/);
    }
    // Read (and then refused for its bad field, not its label).
    for (const contentType of ['application/json; charset=utf-8', 'application/json; charset=UTF8']) assert.equal((await post(body, { 'content-type': contentType })).statusCode, 400, contentType);
  });

  it('a body on a route that takes none is not read, well-formed or not', async () => {
    const account = await createAccount(harness.app, { name: 'revoke with a body' });
    const { id } = await createKey(harness.app, account.id);
    const revoked = await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${id}`, headers: { ...adminHeaders, 'content-type': 'application/json' }, payload: '{"half' });
    assert.equal(revoked.statusCode, 200, revoked.body);
  });

  it('a wrong content type → 415, and the process is still healthy afterwards', async () => {
    const response = await post('model=seedance-2.0', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(response.statusCode, 415);
    assert.equal((await harness.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });
});
