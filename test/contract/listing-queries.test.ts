import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { validByDocument } from '../helpers/json-schema-judge.ts';

// A listing's query value the OpenAPI document calls valid is one the gateway accepts, and the
// other way round. The task listing reads an empty `limit` as the default, which the document
// (an integer) called invalid; Schemathesis runs with other seeds reported it.

type Json = Record<string, any>;

/** [route, parameter, values with what the document and the gateway should both say]. */
const CASES: Array<[string, string, Array<[string, boolean]>]> = [
  ['/v1/video/generations', 'limit', [['', true], ['1', true], ['100', true], ['0', false], ['101', false], ['two', false], ['1.5', false], [' ', false]]],
  ['/v1/video/generations', 'status', [['', true], ['failed', true], ['done', false]]],
  ['/admin/accounts', 'limit', [['', false], ['50', true], ['0', false]]],
];

/** A query value as the document's reader takes it: digits are the integer a client sends so. */
const asDeserialized = (value: string): unknown => (/^[0-9]+$/.test(value) ? Number(value) : value);

describe('the OpenAPI document on listing queries', () => {
  let harness: TestApp;
  let document: Json;
  let key: string;
  before(async () => {
    harness = await startTestApp('listing-queries');
    document = (await harness.app.inject({ url: '/openapi.json' })).json();
    const account = await createAccount(harness.app, { name: 'queries', balance_usd: 1 });
    key = (await createKey(harness.app, account.id)).key;
  });
  after(() => harness.close());

  for (const [route, parameter, values] of CASES) {
    it(`${route} ?${parameter}=: the document calls a value valid exactly when the gateway takes it`, async () => {
      const declared = (document.paths[route].get.parameters as Json[]).find((entry) => entry.name === parameter);
      assert.ok(declared, `${route} documents ${parameter}`);
      const byDocument = validByDocument(declared.schema, values.map(([value]) => asDeserialized(value)));
      const headers = route.startsWith('/admin/') ? adminHeaders : bearer(key);
      for (const [index, [value, expected]] of values.entries()) {
        const answer = await harness.app.inject({ method: 'GET', url: `${route}?${parameter}=${encodeURIComponent(value)}`, headers });
        assert.equal(answer.statusCode, expected ? 200 : 400, `the gateway on ?${parameter}=${value}: ${answer.body.slice(0, 200)}`);
        assert.equal(byDocument[index], expected, `the document on ?${parameter}=${JSON.stringify(value)}`);
      }
    });
  }
});
