import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

// The OpenAPI document at /openapi.json: valid OpenAPI 3.1 (by the official schema, as bundled
// with Schemathesis, and by our own structure checks), one operation for every public route the
// router has and none for the internal ones, each with its security and error responses.

type Json = Record<string, any>;
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const PUBLIC = /^\/(?:v1|admin)\/|^\/(?:healthz|readyz|metrics)$/;

/** Every (method, path) the router answers, read from Fastify's own route tree. */
function routerOperations(tree: string): Set<string> {
  const operations = new Set<string>();
  const prefixes: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^([│ ]*)[├└]── (\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    const fullPath = (prefixes[depth - 1] ?? '') + match[2]!;
    prefixes[depth] = fullPath;
    for (const method of (match[3] ?? '').split(', ').filter(Boolean)) operations.add(`${method} ${fullPath}`);
  }
  return operations;
}

/** `/v1/video/generations/{task_id}` → `/v1/video/generations/:task_id`. */
function routerPath(documentPath: string): string {
  return documentPath.replace(/\{([^}]+)\}/g, ':$1');
}

function documentedOperations(document: Json): Array<{ method: string; path: string; operation: Json }> {
  return Object.entries(document.paths as Json).flatMap(([documentPath, pathItem]) =>
    HTTP_METHODS.filter((method) => method in pathItem).map((method) => ({ method, path: documentPath, operation: pathItem[method] as Json })),
  );
}

function resolve(document: Json, reference: string): Json | undefined {
  return reference
    .replace(/^#\//, '')
    .split('/')
    .reduce<Json | undefined>((node, part) => node?.[part.replaceAll('~1', '/').replaceAll('~0', '~')], document);
}

describe('the OpenAPI document', () => {
  let harness: TestApp;
  let document: Json;
  before(async () => {
    harness = await startTestApp('openapi-document');
    const response = await harness.app.inject({ url: '/openapi.json' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    document = response.json();
  });
  after(() => harness.close());

  it('is valid OpenAPI 3.1 by the official schema', () => {
    const check = spawnSync(
      path.join(projectRoot, '.tools/venv/bin/python'),
      [
        '-c',
        'import json, sys\nfrom schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR\nerrors = [str(error) for error in OPENAPI_31_VALIDATOR.iter_errors(json.load(sys.stdin))]\nprint("\\n\\n".join(errors[:5]))\nsys.exit(1 if errors else 0)',
      ],
      { input: JSON.stringify(document), encoding: 'utf8' },
    );
    assert.equal(check.status, 0, check.stdout + check.stderr);
  });

  it('has the structure of an OpenAPI 3.1 document', () => {
    assert.match(document.openapi, /^3\.1\.\d+$/);
    assert.equal(typeof document.info.title, 'string');
    assert.equal(typeof document.info.version, 'string');
    assert.equal(document.servers[0].url, `http://${harness.config.HOST}:${harness.config.PORT}`);
    const operationIds = new Set<string>();
    for (const { method, path: documentPath, operation } of documentedOperations(document)) {
      const label = `${method.toUpperCase()} ${documentPath}`;
      assert.ok(documentPath.startsWith('/'), label);
      assert.equal(typeof operation.operationId, 'string', `${label} has an operationId`);
      assert.ok(!operationIds.has(operation.operationId), `${label}: operationId ${operation.operationId} is unique`);
      operationIds.add(operation.operationId);
      assert.ok(Array.isArray(operation.tags) && operation.tags.length > 0, `${label} has tags`);
      // Every {name} in the path is a required path parameter, and nothing else is.
      const templated = [...documentPath.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]).sort();
      const declared = (operation.parameters ?? []).filter((parameter: Json) => parameter.in === 'path');
      assert.deepEqual(declared.map((parameter: Json) => parameter.name).sort(), templated, `${label} path parameters`);
      for (const parameter of declared) assert.equal(parameter.required, true, `${label} ${parameter.name} is required`);
      const statuses = Object.keys(operation.responses);
      assert.ok(statuses.length > 0, `${label} declares responses`);
      for (const status of statuses) {
        assert.match(status, /^[1-5]\d\d$/, `${label}: ${status} is a status code`);
        assert.equal(typeof operation.responses[status].description, 'string', `${label} ${status} has a description`);
      }
      for (const requirement of operation.security) {
        for (const scheme of Object.keys(requirement)) assert.ok(document.components.securitySchemes[scheme], `${label}: scheme ${scheme} exists`);
      }
    }
    for (const match of JSON.stringify(document).matchAll(/"\$ref":"([^"]+)"/g)) {
      assert.ok(resolve(document, match[1]!), `${match[1]} resolves`);
    }
  });

  it('lists every public route the router has, and no internal one', () => {
    const routed = [...routerOperations(harness.app.printRoutes({ commonPrefix: false }))].filter((operation) => !operation.startsWith('HEAD '));
    const documented = documentedOperations(document).map(({ method, path: documentPath }) => `${method.toUpperCase()} ${routerPath(documentPath)}`);
    const publicRoutes = routed.filter((operation) => PUBLIC.test(operation.split(' ')[1]!));
    assert.deepEqual([...documented].sort(), [...publicRoutes].sort());
    for (const internal of ['/openapi.json', '/docs', '/console']) {
      assert.ok(routed.some((operation) => operation.split(' ')[1]!.startsWith(internal)), `the router has ${internal}`);
      assert.ok(!Object.keys(document.paths).some((documentPath) => documentPath.startsWith(internal)), `${internal} is not documented`);
    }
  });

  it('declares the bearer credential and the spec error body on every route', () => {
    assert.deepEqual(document.components.securitySchemes.apiKey, { type: 'http', scheme: 'bearer', description: document.components.securitySchemes.apiKey.description });
    assert.equal(document.components.securitySchemes.adminToken.scheme, 'bearer');
    for (const { method, path: documentPath, operation } of documentedOperations(document)) {
      const label = `${method.toUpperCase()} ${documentPath}`;
      const expectedScheme = documentPath.startsWith('/v1/') ? 'apiKey' : documentPath.startsWith('/admin/') ? 'adminToken' : undefined;
      if (expectedScheme) {
        assert.deepEqual(operation.security, [{ [expectedScheme]: [] }], `${label} security`);
        assert.ok(operation.responses['401'], `${label} declares 401`);
        assert.ok(operation.responses['500'], `${label} declares 500`);
      } else if (documentPath === '/metrics') {
        // METRICS_TOKEN when the operator set one, nothing otherwise.
        assert.deepEqual(operation.security, [{ metricsToken: [] }, {}], `${label} security`);
        assert.ok(operation.responses['401'], `${label} declares 401`);
      } else {
        assert.deepEqual(operation.security, [], `${label} is open`);
      }
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        if (Number(status) < 400) continue;
        const schema = response.content['application/json'].schema as Json;
        const body = schema.$ref ? resolve(document, schema.$ref)! : schema;
        const error = body.properties.error.$ref ? resolve(document, body.properties.error.$ref)! : body.properties.error;
        assert.deepEqual(body.required, ['error'].concat(body.properties.checks ? ['checks'] : []), `${label} ${status}: error is required`);
        for (const field of ['message', 'type', 'code']) assert.ok(error.required.includes(field), `${label} ${status}: error.${field} is required`);
        assert.ok(error.properties.param, `${label} ${status}: error.param is declared`);
      }
    }
  });

  it('describes each video model by its own rules and lists the catalog models per endpoint', () => {
    const videoBody = document.paths['/v1/video/generations'].post.requestBody.content['application/json'].schema;
    const seedance = videoBody.oneOf.find((branch: Json) => branch.properties.model.enum?.[0] === 'seedance-1.0-pro' || branch.properties.model.const === 'seedance-1.0-pro');
    assert.ok(seedance, 'a branch for seedance-1.0-pro');
    const examples = document.paths['/v1/video/generations'].post.requestBody.content['application/json'].examples;
    assert.ok(Object.keys(examples ?? {}).length >= 1, 'the docs page offers a body to try');
    // Optional fields may be null (read as left out): an enum beside a null.
    const seconds = seedance.properties.seconds.anyOf as Json[];
    assert.deepEqual(seconds.find((choice) => choice.enum)?.enum, ['5', '10']);
    assert.ok(seconds.some((choice) => choice.type === 'null'), 'seconds may be null');
    assert.equal(seedance.additionalProperties, false);
    const chatModel = document.paths['/v1/chat/completions'].post.requestBody.content['application/json'].schema.properties.model;
    assert.deepEqual(chatModel.enum, ['gpt-4o-mini']);
    const streamed = document.paths['/v1/chat/completions'].post.responses['200'].content;
    assert.ok(streamed['application/json'] && streamed['text/event-stream'], 'JSON and Server-Sent Events');
  });

  it('declares the headers answers carry, and a real answer carries what its status declares', async () => {
    const headersOf = (documentPath: string, method: string, status: string) => Object.keys(document.paths[documentPath][method].responses[status].headers ?? {}).sort();
    const limits = ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'];
    const tokens = ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'];
    assert.deepEqual(headersOf('/v1/chat/completions', 'post', '200'), [...limits, ...tokens, 'x-request-id'].sort());
    // A token-limit refusal and a shed call carry the tokens trio too; an unknown model does not.
    // A provider's wait in milliseconds is passed on beside Retry-After (chat and images only);
    // a call larger than the whole minute is told not to retry.
    assert.deepEqual(headersOf('/v1/chat/completions', 'post', '429'), ['retry-after', 'retry-after-ms', ...limits, ...tokens, 'x-request-id', 'x-should-retry'].sort());
    // A 503 is the gateway's own (an upstream's 5xx becomes a 502): no provider's wait on it.
    assert.deepEqual(headersOf('/v1/chat/completions', 'post', '503'), ['retry-after', ...limits, ...tokens, 'x-request-id'].sort());
    assert.ok(headersOf('/v1/images/generations', 'post', '502').includes('retry-after-ms'));
    assert.deepEqual(headersOf('/v1/chat/completions', 'post', '404'), [...limits, 'x-request-id'].sort());
    assert.deepEqual(headersOf('/v1/video/generations', 'post', '200'), ['idempotent-replayed', ...limits, 'x-request-id'].sort());
    assert.deepEqual(headersOf('/v1/video/generations', 'post', '429'), ['retry-after', ...limits, 'x-request-id'].sort());
    assert.deepEqual(headersOf('/v1/models', 'get', '401'), ['x-request-id']);
    assert.deepEqual(headersOf('/admin/accounts', 'post', '201'), ['idempotent-replayed', 'x-request-id']);
    assert.deepEqual(headersOf('/admin/accounts/{id}/keys', 'post', '201'), ['idempotent-replayed', 'x-request-id']);

    const account = await harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: { authorization: `Bearer ${harness.config.ADMIN_TOKEN}` }, payload: { name: 'headers' } });
    const key = await harness.app.inject({ method: 'POST', url: `/admin/accounts/${account.json().id}/keys`, headers: { authorization: `Bearer ${harness.config.ADMIN_TOKEN}` }, payload: { name: 'k' } });
    const listed = await harness.app.inject({ url: '/v1/models', headers: { authorization: `Bearer ${key.json().key}` } });
    assert.equal(listed.statusCode, 200);
    for (const header of headersOf('/v1/models', 'get', '200')) assert.ok(listed.headers[header], `GET /v1/models answers ${header}`);
    const refused = await harness.app.inject({ url: '/v1/models', headers: { authorization: 'Bearer fg_wrong' } });
    for (const header of headersOf('/v1/models', 'get', '401')) assert.ok(refused.headers[header], `a 401 answers ${header}`);
    // Two Authorization headers are a 400 on any authenticated route: declared there too.
    // inject sends an array as one header per item (its types say a string only).
    const repeated = { authorization: [`Bearer ${key.json().key}`, `Bearer ${key.json().key}`] } as unknown as Record<string, string>;
    const twice = await harness.app.inject({ url: '/v1/models', headers: repeated });
    assert.equal(twice.statusCode, 400);
    for (const [documentPath, method] of [['/v1/models', 'get'], ['/admin/accounts', 'post'], ['/v1/video/generations/{task_id}', 'get']] as const) {
      assert.ok(document.paths[documentPath][method].responses['400'], `${method} ${documentPath} declares its 400`);
    }
  });

  it('serves a docs page whose assets come from the gateway itself', async () => {
    const page = await harness.app.inject({ url: '/docs' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    const sources = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    assert.ok(sources.some((source) => source.endsWith('swagger-ui-bundle.js')), 'the page loads Swagger UI');
    for (const source of sources) {
      assert.ok(!/^(https?:)?\/\//.test(source), `${source} is served locally`);
      const asset = await harness.app.inject({ url: new URL(source, 'http://gateway/docs').pathname });
      assert.equal(asset.statusCode, 200, `${source} is served`);
    }
    const json = await harness.app.inject({ url: '/docs/json' });
    assert.deepEqual(json.json(), document);
  });
});
