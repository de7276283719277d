import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createAccount, createKey, startTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';

// Requests Node's HTTP parser refuses before Fastify sees them (a header block over 16 KB, a
// request line that is not HTTP) still get an error in the spec's body, over a real socket.

describe('requests the HTTP parser refuses', () => {
  let harness: TestApp;
  let port: number;
  before(async () => {
    harness = await startTestApp('malformed_http', { REQUEST_TIMEOUT_MS: '1000' });
    await harness.app.listen({ host: '127.0.0.1', port: 0 });
    port = (harness.app.server.address() as AddressInfo).port;
  });
  after(() => harness.close());

  /** Writes `raw` and reads until the server closes the connection. */
  function exchange(raw: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(raw));
      let answer = '';
      socket.setEncoding('utf8');
      socket.on('data', (text: string) => (answer += text));
      socket.on('close', () => resolve(answer));
      socket.on('error', reject);
    });
  }

  function parse(answer: string): { status: number; headers: string; body: { error: Record<string, unknown> } } {
    const [head, body] = answer.split('\r\n\r\n', 2) as [string, string];
    return { status: Number(head.split(' ')[1]), headers: head, body: JSON.parse(body) };
  }

  it('a header block over 16 KB → 431 in the spec\'s error body', async () => {
    const answer = parse(await exchange(`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`));
    assert.equal(answer.status, 431);
    assert.match(answer.headers, /content-type: application\/json/);
    assert.match(answer.headers, /\r\nx-request-id: req_[\w-]+/, 'a request id to quote, as every answer has');
    assert.deepEqual(answer.body, { error: { message: 'The request line and headers together are larger than 16 KB.', type: 'invalid_request_error', code: 'headers_too_large' } });
  });

  it('a request that is not HTTP, or a header line without a colon → 400 in the spec\'s error body', async () => {
    for (const raw of ['GARBAGE\r\n\r\n', 'GET /v1/models HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n', 'POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n']) {
      const answer = parse(await exchange(raw));
      assert.equal(answer.status, 400, JSON.stringify(raw));
      assert.deepEqual(answer.body, { error: { message: 'The request is not valid HTTP/1.1.', type: 'invalid_request_error', code: 'invalid_request' } });
    }
  });

  it('a body that does not arrive in time → 408 in the spec\'s error body, and the connection closed', { timeout: 10_000 }, async () => {
    const started = performance.now();
    // Promises 100 bytes, sends 2, then nothing: a client trickling its body for ever.
    const { key } = await createKey(harness.app, (await createAccount(harness.app, { name: 'slow body' })).id);
    const answer = parse(await exchange(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"`));
    assert.equal(answer.status, 408);
    assert.equal(answer.body.error.code, 'request_timeout');
    // Node checks the limit every few seconds (its connectionsCheckingInterval).
    assert.ok(performance.now() - started < 8_000, `answered after ${(performance.now() - started).toFixed(0)} ms`);
  });

  it('an HTTP/1.1 request without Host → 400 in the spec\'s error body (Node\'s own answer has no body)', async () => {
    const answer = parse(await exchange('GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n'));
    assert.equal(answer.status, 400);
    assert.match(answer.headers, /\r\nx-request-id: req_[\w-]+/);
    assert.deepEqual(answer.body, { error: { message: 'An HTTP/1.1 request must carry a Host header.', type: 'invalid_request_error', code: 'invalid_request' } });
    // HTTP/1.0 has no Host requirement.
    assert.match(await exchange('GET /healthz HTTP/1.0\r\n\r\n'), /^HTTP\/1\.1 200 OK/);
  });

  it('a path the router cannot decode → 400 with the request id, readable by a page on another origin', async () => {
    const answer = parse(await exchange('GET /v1/models/%ZZ HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nConnection: close\r\n\r\n'));
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.code, 'invalid_request');
    assert.match(answer.headers, /\r\nx-request-id: req_[\w-]+/);
    assert.match(answer.headers, /\r\naccess-control-allow-origin: \*/);
  });

  it('sends 100 Continue only to a request that passed its key check: one without a key gets its 401 before sending its body', async () => {
    const { key } = await createKey(harness.app, (await createAccount(harness.app, { name: 'expect continue', balance_usd: 1 })).id);
    const head = (authorization: string, length = 20_000_000, expect = '100-continue') =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${authorization}content-type: application/json\r\ncontent-length: ${length}\r\nexpect: ${expect}\r\nconnection: close\r\n\r\n`;
    /** The first answer line to the head alone (no body sent). */
    const firstLine = (raw: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(raw));
        socket.setEncoding('utf8');
        socket.once('data', (text: string) => {
          resolve(text.split('\r\n')[0]!);
          socket.destroy();
        });
        socket.on('error', reject);
      });
    assert.equal(await firstLine(head('')), 'HTTP/1.1 401 Unauthorized');
    const bearerLine = `authorization: Bearer ${key}\r\n`;
    assert.equal(await firstLine(head(bearerLine)), 'HTTP/1.1 100 Continue');
    // Over the chat route's limit (20 MiB): refused from the length alone, never invited.
    assert.equal(await firstLine(head(bearerLine, 30_000_000)), 'HTTP/1.1 413 Payload Too Large');
    // Node's reading of the header (one expectation among others) is the one that counts.
    assert.equal(await firstLine(head(bearerLine, 2_000, '100-continue, x-other')), 'HTTP/1.1 100 Continue');
    // And the body sent after it is read as usual.
    const body = JSON.stringify({ name: 'after continue' });
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(`POST /admin/accounts HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${TEST_ADMIN_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n`),
      );
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (text: string) => {
        if (received === '' && text.startsWith('HTTP/1.1 100 Continue')) socket.write(body);
        received += text;
      });
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
    });
    assert.match(answer, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 Created/);
    assert.match(answer, /"name":"after continue"/);
  });

  it('still serves well-formed requests afterwards', async () => {
    const answer = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.match(answer, /^HTTP\/1\.1 200 OK/);
  });
});
