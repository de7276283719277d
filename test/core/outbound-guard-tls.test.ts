import assert from 'node:assert/strict';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { ForbiddenDestinationError, createGuardedDispatcher, parseOutboundAllowlist } from '../../core/outbound-guard.ts';

// The guard connects to the vetted IP address itself and hands the socket to TLS; these tests
// show TLS still speaks to and verifies the original hostname, not the address.
// A throwaway self-signed P-256 certificate for DNS:localhost only (valid until 2126), used by
// nothing but this test.
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgvtjHe9Dpl8zioh+8
5EQYRjeogCFGUvoiOpSUpjPAR5qhRANCAAQVWT1CEy+ipdH7j4PsFcH/kEwkiN28
XjlI4mW8U7HDxU2941Rc4m69B0kvDejILyZfHwnqrYvti17eykMqo2hW
-----END PRIVATE KEY-----
`;
const TEST_CERTIFICATE = `-----BEGIN CERTIFICATE-----
MIIBlTCCATugAwIBAgIUckrTdofglDhUIoxGa+9UTJ7f8TgwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMjA3MjA0NloYDzIxMjYxMDI5
MDcyMDQ2WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQVWT1CEy+ipdH7j4PsFcH/kEwkiN28XjlI4mW8U7HDxU2941Rc4m69
B0kvDejILyZfHwnqrYvti17eykMqo2hWo2kwZzAdBgNVHQ4EFgQUQFEd/0+nB0ma
5FgY2SrDT4HFH/YwHwYDVR0jBBgwFoAUQFEd/0+nB0ma5FgY2SrDT4HFH/YwDwYD
VR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglsb2NhbGhvc3QwCgYIKoZIzj0EAwID
SAAwRQIhAPOAHMdKbfzq0X9D5N1MKRTTwu8cKUkUcUh4BJNvXyqWAiAIr1JWqf1d
B6gaYBALeguURUNsauL5nglKKzWqeWtXaw==
-----END CERTIFICATE-----
`;

describe('guarded dispatcher over TLS', () => {
  const seen = { serverNames: [] as Array<string | false>, hosts: [] as Array<string | undefined>, connections: 0 };
  const server = createServer({ key: TEST_KEY, cert: TEST_CERTIFICATE }, (incoming, outgoing) => {
    seen.hosts.push(incoming.headers.host);
    outgoing.end('secure ok');
  });
  server.on('connection', () => (seen.connections += 1));
  // servername is set on server-side TLS sockets but missing from @types/node 20.
  server.on('secureConnection', (socket) => seen.serverNames.push((socket as typeof socket & { servername?: string | false }).servername ?? false));
  let port = 0;

  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('sends SNI and Host for the original hostname and verifies its certificate', async () => {
    const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('loopback'), tls: { ca: TEST_CERTIFICATE } });
    try {
      const response = await request(`https://localhost:${port}/hooks`, { dispatcher });
      assert.equal(response.statusCode, 200);
      assert.equal(await response.body.text(), 'secure ok');
    } finally {
      await dispatcher.close();
    }
    assert.deepEqual(seen.serverNames, ['localhost']);
    assert.deepEqual(seen.hosts, [`localhost:${port}`]);
  });

  it('fails certificate verification when the URL names an address the certificate does not cover', async () => {
    const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('loopback'), tls: { ca: TEST_CERTIFICATE } });
    try {
      await assert.rejects(request(`https://127.0.0.1:${port}/hooks`, { dispatcher }), (error: NodeJS.ErrnoException) => error.code === 'ERR_TLS_CERT_ALTNAME_INVALID');
    } finally {
      await dispatcher.close();
    }
  });

  it('refuses an https loopback destination without the allowlist, before the handshake', async () => {
    const before = seen.connections;
    const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist(''), tls: { ca: TEST_CERTIFICATE } });
    try {
      await assert.rejects(request(`https://localhost:${port}/hooks`, { dispatcher }), ForbiddenDestinationError);
    } finally {
      await dispatcher.close();
    }
    assert.equal(seen.connections, before);
  });
});
