import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import {
  ForbiddenDestinationError,
  createGuardedDispatcher,
  isForbiddenAddress,
  parseOutboundAllowlist,
  validateCallerUrl,
  vetDestination,
} from '../../core/outbound-guard.ts';

// A real HTTP server that counts TCP connections, bytes and requests, so a test can tell
// "refused before connecting" from "connected but wrote nothing" from "request arrived".
async function startCountingServer(host: string, port = 0, answer?: (path: string) => { status: number; headers?: Record<string, string> }) {
  const counts = { connections: 0, bytes: 0, requests: [] as string[] };
  const server: Server = createServer((incoming, outgoing) => {
    counts.requests.push(incoming.url ?? '');
    const { status, headers } = answer?.(incoming.url ?? '') ?? { status: 200 };
    outgoing.writeHead(status, headers).end('ok');
  });
  server.on('connection', (socket) => {
    counts.connections += 1;
    socket.on('data', (chunk: Buffer) => (counts.bytes += chunk.length));
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
  return { counts, port: (server.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

async function refusal(url: string, allowlist = parseOutboundAllowlist('')): Promise<ForbiddenDestinationError> {
  const dispatcher = createGuardedDispatcher({ allowlist, connectTimeoutMs: 2000 });
  try {
    const response = await request(url, { dispatcher });
    await response.body.dump();
    assert.fail(`${url} answered ${response.statusCode} instead of being refused`);
  } catch (error) {
    assert.ok(error instanceof ForbiddenDestinationError, `${url}: expected ForbiddenDestinationError, got ${String(error)}`);
    return error;
  } finally {
    await dispatcher.close();
  }
}

describe('isForbiddenAddress', () => {
  const none = parseOutboundAllowlist(undefined);

  it('refuses loopback, private, link-local, CGNAT, metadata and special IPv4 ranges', () => {
    for (const ip of ['127.0.0.1', '127.255.255.254', '0.0.0.0', '0.1.2.3', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.0.1',
      '169.254.169.254', '169.254.0.1', '100.64.0.1', '100.100.100.200', '224.0.0.1', '239.255.255.250', '255.255.255.255', '240.0.0.1', '192.0.2.1', '198.18.0.1']) {
      assert.equal(isForbiddenAddress(ip, none), true, ip);
    }
  });

  it('allows public IPv4 just outside those ranges', () => {
    for (const ip of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '172.15.255.255', '100.128.0.1', '11.0.0.1', '192.169.0.1']) {
      assert.equal(isForbiddenAddress(ip, none), false, ip);
    }
  });

  it('refuses IPv6 loopback, unspecified, unique-local, link-local, multicast, metadata and documentation ranges', () => {
    for (const ip of ['::1', '::', 'fc00::1', 'fd12:3456::1', 'fd00:ec2::254', 'fe80::1', 'fe80::1%1', 'ff02::1', '2001:db8::1', '2001::1', 'fec0::1']) {
      assert.equal(isForbiddenAddress(ip, none), true, ip);
    }
  });

  it('refuses IPv4-mapped, IPv4-compatible, translated, NAT64 and 6to4 forms of forbidden IPv4', () => {
    for (const ip of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::127.0.0.1', '::7f00:1', '::808:808',
      '::ffff:0:127.0.0.1', '64:ff9b::127.0.0.1', '64:ff9b::a9fe:a9fe', '64:ff9b:1::8.8.8.8', '2002:7f00:1::', '2002:a00:1::1']) {
      assert.equal(isForbiddenAddress(ip, none), true, ip);
    }
  });

  it('allows public IPv6 and the mapped or NAT64 forms of public IPv4', () => {
    for (const ip of ['2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::1']) {
      assert.equal(isForbiddenAddress(ip, none), false, ip);
    }
  });

  it('lets the allowlist open exactly what it names, mapped forms included', () => {
    const loopback = parseOutboundAllowlist('loopback');
    for (const ip of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) assert.equal(isForbiddenAddress(ip, loopback), false, ip);
    for (const ip of ['10.0.0.1', '169.254.169.254', '0.0.0.0', '::']) assert.equal(isForbiddenAddress(ip, loopback), true, ip);
    const privateTen = parseOutboundAllowlist(' 10.0.0.0/8 , fd00::/8 ');
    assert.equal(isForbiddenAddress('10.9.8.7', privateTen), false);
    assert.equal(isForbiddenAddress('::ffff:10.9.8.7', privateTen), false);
    assert.equal(isForbiddenAddress('fd00:ec2::254', privateTen), false);
    assert.equal(isForbiddenAddress('192.168.1.1', privateTen), true);
    const mappedEntry = parseOutboundAllowlist('::ffff:192.168.0.0/112');
    assert.equal(isForbiddenAddress('192.168.3.4', mappedEntry), false);
  });

  it('parses an empty allowlist as nothing and refuses a typo', () => {
    assert.deepEqual(parseOutboundAllowlist(''), []);
    assert.deepEqual(parseOutboundAllowlist(' , '), []);
    assert.throws(() => parseOutboundAllowlist('loopbak'), /OUTBOUND_ALLOWLIST: "loopbak"/);
    assert.throws(() => parseOutboundAllowlist('10.0.0.0/33'), /OUTBOUND_ALLOWLIST/);
  });
});

describe('ForbiddenDestinationError.publicMessage', () => {
  it('names the range in words a caller reads, with the right article', async () => {
    // An address as the host: vetted as it is, no resolver asked.
    const said = async (ip: string) => {
      const host = ip.includes(':') ? `[${ip}]` : ip;
      const refusal = await vetDestination(host, []).then(
        () => undefined,
        (error: unknown) => error,
      );
      assert.ok(refusal instanceof ForbiddenDestinationError, `${ip}: ${String(refusal)}`);
      return refusal.publicMessage.replace(host, 'hook.example');
    };
    assert.equal(await said('100.64.0.1'), 'refused: hook.example is a carrier-grade NAT address, which the gateway does not call');
    assert.equal(await said('0.0.0.0'), 'refused: hook.example is an unspecified address, which the gateway does not call');
    assert.equal(await said('169.254.169.254'), 'refused: hook.example is a link-local address, which the gateway does not call');
    assert.equal(await said('fd00::1'), 'refused: hook.example is a unique-local address, which the gateway does not call');
    assert.equal(await said('2002:0a00:0001::1'), 'refused: hook.example is a 6to4 (carrying private) address, which the gateway does not call');
  });
});

describe('validateCallerUrl', () => {
  it('accepts absolute http and https URLs', () => {
    for (const raw of ['https://example.com/hooks', 'http://example.com:8080/a?b=c', 'https://[2606:4700::1111]/x']) {
      const result = validateCallerUrl(raw);
      assert.ok(result instanceof URL, `${raw}: ${String(result)}`);
    }
  });

  it('gives a reason for everything else', () => {
    const cases: Array<[string, RegExp]> = [
      ['/relative/path', /absolute/],
      ['not a url', /absolute/],
      ['ftp://example.com/file', /scheme must be http or https, not ftp/],
      ['file:///etc/passwd', /scheme/],
      ['javascript:alert(1)', /scheme/],
      ['https://user:secret@example.com/', /credentials/],
      ['https://user@example.com/', /credentials/],
      [`https://example.com/${'a'.repeat(2100)}`, /longer than 2048/],
    ];
    for (const [raw, reason] of cases) {
      const result = validateCallerUrl(raw);
      assert.equal(typeof result, 'string', raw);
      assert.match(result as string, reason, raw);
    }
  });
});

describe('vetDestination', () => {
  it('reads hostnames in odd IPv4 notations the way the resolver would, without asking it', async () => {
    const cases: Array<[string, string]> = [['0x7f.1', '127.0.0.1'], ['017700000001', '127.0.0.1'], ['2130706433', '127.0.0.1'], ['127.1', '127.0.0.1'], ['0', '0.0.0.0'], ['[::1]', '::1']];
    for (const [hostname, address] of cases) {
      await assert.rejects(vetDestination(hostname, []), (error: unknown) => error instanceof ForbiddenDestinationError && error.address === address, hostname);
    }
    assert.deepEqual(await vetDestination('0x7f.1', parseOutboundAllowlist('loopback')), ['127.0.0.1']);
  });
});

describe('guarded dispatcher over real loopback sockets', () => {
  let target: Awaited<ReturnType<typeof startCountingServer>>;
  let targetV6: Awaited<ReturnType<typeof startCountingServer>> | undefined;

  before(async () => {
    target = await startCountingServer('127.0.0.1');
    // Same port on ::1 when this machine has IPv6, so http://[::1]:port/ has somewhere to land.
    targetV6 = await startCountingServer('::1', target.port).catch(() => undefined);
  });
  after(async () => {
    await target.close();
    await targetV6?.close();
  });

  it('refuses loopback, odd notations, metadata, localhost and private addresses before any byte is sent', async () => {
    const port = target.port;
    const urls = [
      `http://127.0.0.1:${port}/`, `http://[::1]:${port}/`, `http://0.0.0.0:${port}/`, `http://0:${port}/`,
      `http://017700000001:${port}/`, `http://0x7f.1:${port}/`, `http://2130706433:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`,
      `http://169.254.169.254:${port}/latest/meta-data`, `http://localhost:${port}/`, `http://127.1:${port}/`,
      `http://10.0.0.1:${port}/`, `http://172.16.5.4:${port}/`, `http://192.168.1.1:${port}/`, `http://100.64.0.1:${port}/`,
      `http://[fd00:ec2::254]:${port}/`, `http://[fe80::1]:${port}/`, `https://127.0.0.1:${port}/`,
    ];
    for (const url of urls) {
      const error = await refusal(url);
      assert.match(error.message, /OUTBOUND_ALLOWLIST/, url);
    }
    assert.equal(target.counts.connections, 0);
    assert.equal(targetV6?.counts.connections ?? 0, 0);
  });

  it('names the refused address and how to allow it', async () => {
    const error = await refusal(`http://localhost:${target.port}/`);
    assert.equal(error.hostname, 'localhost');
    assert.match(error.message, /localhost at (127\.0\.0\.1|::1) \(loopback address\)/);
    assert.match(error.message, /to OUTBOUND_ALLOWLIST/);
    assert.match(error.message, /\(or "loopback"\)/);
  });

  it('suggests the "loopback" keyword only for loopback addresses', () => {
    const metadata = new ForbiddenDestinationError('169.254.169.254', '169.254.169.254', 'linkLocal');
    assert.match(metadata.message, /add 169\.254\.169\.254\/32 to OUTBOUND_ALLOWLIST/);
    assert.doesNotMatch(metadata.message, /loopback/);
  });

  it('lets loopback through when the allowlist says loopback', async () => {
    const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('loopback') });
    try {
      // A subdomain of localhost too, which the system resolver does not know (RFC 6761 makes it
      // loopback, as the api's check at submission takes it).
      for (const url of [`http://127.0.0.1:${target.port}/allowed`, `http://localhost:${target.port}/allowed`, `http://[::ffff:127.0.0.1]:${target.port}/allowed`, `http://hooks.localhost:${target.port}/allowed`]) {
        const response = await request(url, { dispatcher });
        assert.equal(response.statusCode, 200, url);
        assert.equal(await response.body.text(), 'ok');
      }
    } finally {
      await dispatcher.close();
    }
    assert.deepEqual(target.counts.requests, ['/allowed', '/allowed', '/allowed', '/allowed']);
  });

  it('re-checks the connected address: an allowlisted 0.0.0.0 that lands on 127.0.0.1 is cut before a byte is written', async () => {
    const fresh = await startCountingServer('127.0.0.1');
    try {
      const error = await refusal(`http://0.0.0.0:${fresh.port}/`, parseOutboundAllowlist('0.0.0.0/32'));
      assert.equal(error.address, '127.0.0.1');
      // The TCP handshake happened (that is how we learnt the address), but nothing was sent.
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(fresh.counts.connections, 1);
      assert.equal(fresh.counts.bytes, 0);
      assert.deepEqual(fresh.counts.requests, []);
    } finally {
      await fresh.close();
    }
  });

  it('does not follow a redirect to an internal address', async () => {
    const internal = await startCountingServer('127.0.0.1');
    const redirecting = await startCountingServer('127.0.0.1', 0, () => ({ status: 302, headers: { location: `http://127.0.0.1:${internal.port}/internal` } }));
    // The redirecting server stands in for a public host, so it is the only one allowed.
    const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('127.0.0.1/32') });
    try {
      const response = await request(`http://127.0.0.1:${redirecting.port}/hooks`, { method: 'POST', body: '{}', dispatcher });
      await response.body.dump();
      assert.equal(response.statusCode, 302);
      assert.equal(response.headers.location, `http://127.0.0.1:${internal.port}/internal`);
      assert.deepEqual(redirecting.counts.requests, ['/hooks']);
      assert.equal(internal.counts.connections, 0);
    } finally {
      await dispatcher.close();
      await internal.close();
      await redirecting.close();
    }
  });
});
