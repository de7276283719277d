import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { z } from 'zod';
import { parseRetryAfter } from '../../core/retry-after.ts';
import { classifyVendorFailure, createVendorHttp } from '../../vendors/http.ts';
import { VendorRejectedError, VendorTransientError } from '../../vendors/types.ts';
import { refusedBaseUrl, startRecordingServer, type RecordingServer } from './recording-server.ts';

describe('Retry-After parsing', () => {
  const now = Date.parse('2026-01-28T12:00:00Z');

  it('reads delay-seconds as milliseconds', () => {
    assert.equal(parseRetryAfter('7', now), 7000);
    assert.equal(parseRetryAfter(' 0 ', now), 0);
    assert.equal(parseRetryAfter(['12', '99'], now), 12_000);
  });

  it('reads an HTTP date as the time left until then, never negative', () => {
    assert.equal(parseRetryAfter('Wed, 28 Jan 2026 12:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Wed, 28 Jan 2026 11:59:00 GMT', now), 0);
  });

  it('ignores what is neither', () => {
    for (const value of [undefined, '', 'soon', '-5', '1.5']) assert.equal(parseRetryAfter(value, now), undefined, String(value));
  });
});

describe('classifying a vendor failure', () => {
  const body = JSON.stringify({ error: { code: 'SomeCode', message: 'Some message.' } });

  it('treats 408, 429 and every 5xx as transient, keeping the status and Retry-After', () => {
    for (const status of [408, 429, 500, 502, 503, 504, 599]) {
      const error = classifyVendorFailure('vendor', status, { 'retry-after': '3' }, body);
      assert.ok(error instanceof VendorTransientError, String(status));
      assert.equal(error.status, status);
      assert.equal(error.retryAfterMs, 3000);
    }
  });

  it('treats other 4xx, and unexpected redirects, as a definite refusal with the vendor code', () => {
    for (const status of [301, 400, 401, 403, 404, 409, 422]) {
      const error = classifyVendorFailure('vendor', status, {}, body);
      assert.ok(error instanceof VendorRejectedError, String(status));
      assert.equal(error.status, status);
      assert.equal(error.vendorCode, 'SomeCode');
      assert.match(error.message, /vendor answered \d+ SomeCode: Some message\./);
    }
  });

  it('falls back to the error type, a string error, or the raw text', () => {
    const typed = classifyVendorFailure('vendor', 400, {}, JSON.stringify({ error: { code: null, type: 'invalid_request_error', message: 'bad' } }));
    assert.equal((typed as VendorRejectedError).vendorCode, 'invalid_request_error');
    const plain = classifyVendorFailure('vendor', 400, {}, JSON.stringify({ error: 'plain words' }));
    assert.equal((plain as VendorRejectedError).vendorCode, undefined);
    assert.match(plain.message, /plain words/);
    const html = classifyVendorFailure('vendor', 403, {}, '<html>Forbidden by proxy</html>');
    assert.equal((html as VendorRejectedError).vendorCode, undefined);
    assert.match(html.message, /Forbidden by proxy/);
  });
});

describe('vendor HTTP over loopback', () => {
  let server: RecordingServer;
  before(async () => {
    server = await startRecordingServer();
  });
  after(async () => {
    await server.close();
  });

  const shape = z.looseObject({ id: z.string() });

  it('joins base URL and path whatever the trailing slash, and sends the bearer key', async () => {
    server.answer('GET', '/things/1', { status: 200, body: '{"id":"1","extra":true}' });
    const http = createVendorHttp({ vendor: 'vendor', baseUrl: `${server.baseUrl}/`, apiKey: 'key-1' });
    const thing = await http.json('GET', '/things/1', shape);
    assert.equal(thing.id, '1');
    const sent = server.requests.at(-1)!;
    assert.equal(sent.path, '/things/1');
    assert.equal(sent.headers.authorization, 'Bearer key-1');
  });

  it('reports a 2xx that is not JSON, or not the expected shape, as transient', async () => {
    server.answer('GET', '/html', { status: 200, body: '<html>gateway page</html>' });
    server.answer('GET', '/shapeless', { status: 200, body: '{"identifier":"1"}' });
    const http = createVendorHttp({ vendor: 'vendor', baseUrl: server.baseUrl, apiKey: 'key' });
    await assert.rejects(http.json('GET', '/html', shape), (error: unknown) => {
      assert.ok(error instanceof VendorTransientError);
      assert.match(error.message, /not JSON/);
      return true;
    });
    await assert.rejects(http.json('GET', '/shapeless', shape), (error: unknown) => {
      assert.ok(error instanceof VendorTransientError);
      assert.match(error.message, /unexpected shape/);
      return true;
    });
  });

  it('does not repeat a POST whose 2xx cannot be read: the vendor may have created the task', async () => {
    server.answer('POST', '/tasks-html', { status: 200, body: '<html>gateway page</html>' });
    server.answer('POST', '/tasks-shapeless', { status: 201, body: '{"identifier":"1"}' });
    const http = createVendorHttp({ vendor: 'vendor', baseUrl: server.baseUrl, apiKey: 'key' });
    for (const path of ['/tasks-html', '/tasks-shapeless']) {
      await assert.rejects(http.json('POST', path, shape, { prompt: 'x' }), (error: unknown) => {
        assert.ok(error instanceof VendorRejectedError, String(error));
        assert.match(error.message, /not repeated, as the vendor may have created the task/);
        return true;
      });
    }
  });

  it('gives up on a vendor that never answers after the timeout, as transient', async () => {
    server.answer('GET', '/slow', { status: 200, hang: true });
    const http = createVendorHttp({ vendor: 'vendor', baseUrl: server.baseUrl, apiKey: 'key', timeoutMs: 150 });
    const started = Date.now();
    await assert.rejects(http.json('GET', '/slow', shape), (error: unknown) => {
      assert.ok(error instanceof VendorTransientError);
      assert.equal(error.status, undefined);
      assert.match(error.message, /got no answer/);
      return true;
    });
    assert.ok(Date.now() - started < 5000, 'the timeout bounds the wait');
  });

  it('reports a refused connection as transient', async () => {
    const http = createVendorHttp({ vendor: 'vendor', baseUrl: await refusedBaseUrl(), apiKey: 'key' });
    await assert.rejects(http.json('GET', '/anything', shape), (error: unknown) => {
      assert.ok(error instanceof VendorTransientError);
      assert.match(error.message, /ECONNREFUSED/);
      return true;
    });
  });
});
