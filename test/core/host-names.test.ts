import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { HostNameCheck, MAX_NAMES_PER_REQUEST, isResolvableName } from '../../core/host-names.ts';
import { freePort } from '../../scripts/lib/processes.ts';
import { parseOutboundAllowlist } from '../../core/outbound-guard.ts';
import { startTestDnsServer } from '../../scripts/lib/test-dns-server.ts';

// Names are judged by what DNS answers for them, asked over UDP by Node's c-ares resolver of a
// real DNS server on loopback, whose answers are written in the names (test-dns-server.ts).

const none = parseOutboundAllowlist('');
/** This machine's resolv.conf has no search line; a CI machine's may. */
const NO_SEARCH = { domains: [], ndots: 1 };
const one = (hostname: string, param = 'p') => [{ hostname, param }];

/** A DNS server that takes every query and answers none. */
async function silentServer(): Promise<{ address: string; close: () => void }> {
  const socket = createSocket('udp4');
  await new Promise<void>((ready) => socket.bind(0, '127.0.0.1', () => ready()));
  return { address: `127.0.0.1:${socket.address().port}`, close: () => socket.close() };
}

describe('caller names resolved before anyone is sent there', () => {
  let dns: Awaited<ReturnType<typeof startTestDnsServer>>;
  let check: HostNameCheck;
  before(async () => {
    dns = await startTestDnsServer();
    check = new HostNameCheck(none, [dns.address], 300, NO_SEARCH);
  });
  after(() => dns.stop());

  it('refuses a name leading to cloud metadata, unless the allowlist admits it', async () => {
    assert.deepEqual(await check.firstRefused(one('169-254-169-254.nip.test')), { param: 'p', why: 'internal', detail: '169-254-169-254.nip.test resolves to 169.254.169.254 (linkLocal)' });
    const admitting = new HostNameCheck(parseOutboundAllowlist('169.254.0.0/16'), [dns.address], 300, NO_SEARCH);
    assert.equal(await admitting.firstRefused(one('169-254-169-254.nip.test')), null);
  });

  it('refuses a name when any one of its addresses is internal, IPv6 included', async () => {
    assert.equal((await check.firstRefused(one('93-184-216-34.10-0-0-7.nip.test')))?.detail, '93-184-216-34.10-0-0-7.nip.test resolves to 10.0.0.7 (private)');
    assert.equal((await check.firstRefused(one('93-184-216-34.v6-fd00--1.nip.test')))?.detail, '93-184-216-34.v6-fd00--1.nip.test resolves to fd00::1 (uniqueLocal)');
  });

  it('passes a public name, and names that leave the fetcher nothing to fetch: none such, a failing zone, too long for DNS', async () => {
    const tooLong = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.example`;
    for (const hostname of ['93-184-216-34.nip.test', 'v6-2606-2800-220-1--1.nip.test', 'nothing-here.example', 'servfail.nip.test', tooLong]) {
      assert.equal(await check.firstRefused(one(hostname)), null, hostname);
    }
  });

  it('a name whose DNS server never answers is "unresolved" at the deadline, not let through', async () => {
    const started = performance.now();
    const refusal = await check.firstRefused(one('silent.nip.test'));
    assert.equal(refusal?.why, 'unresolved');
    assert.match(refusal?.detail ?? '', /^silent\.nip\.test: no answer (within 300 ms|in time)$/);
    assert.equal(refusal?.dnsFault, undefined);
    assert.ok(performance.now() - started < 2_000);
  });

  it("asks the next DNS server when one is silent, within the deadline; with every one silent, gives up at it", async () => {
    const silent = [await silentServer(), await silentServer()];
    try {
      const failover = new HostNameCheck(none, [silent[0]!.address, dns.address], 600, NO_SEARCH);
      const started = performance.now();
      assert.equal((await failover.firstRefused(one('169-254-169-254.nip.test')))?.why, 'internal');
      assert.ok(performance.now() - started < 600, `${performance.now() - started} ms`);
      // A server that is down is passed over at once, not after its share.
      const down = new HostNameCheck(none, [`127.0.0.1:${await freePort()}`, dns.address], 2_000, NO_SEARCH);
      const asked = performance.now();
      assert.equal((await down.firstRefused(one('169-254-169-254.nip.test')))?.why, 'internal');
      assert.ok(performance.now() - asked < 900, `${performance.now() - asked} ms`);
      const deaf = new HostNameCheck(none, silent.map((server) => server.address), 400, NO_SEARCH);
      const before = performance.now();
      assert.equal((await deaf.firstRefused(one('93-184-216-34.nip.test')))?.why, 'unresolved');
      // The deadline holds whatever c-ares does with its servers.
      assert.ok(performance.now() - before < 900, `${performance.now() - before} ms`);
    } finally {
      for (const server of silent) server.close();
    }
  });

  it("so is every name when the gateway's DNS server cannot be reached, logged as the operator's to fix", async () => {
    const unreachable = new HostNameCheck(none, [`127.0.0.1:${await freePort()}`], 300, NO_SEARCH);
    const refusal = await unreachable.firstRefused(one('93-184-216-34.nip.test'));
    assert.deepEqual(refusal, { param: 'p', why: 'unresolved', detail: '93-184-216-34.nip.test: ECONNREFUSED', dnsFault: true });
    const lines: Array<[string, string]> = [];
    const log = { info: (_fields: object, message: string) => void lines.push(['info', message]), warn: (_fields: object, message: string) => void lines.push(['warn', message]) };
    const error = await unreachable.refusalError(one('93-184-216-34.nip.test'), () => 'a vendor', log);
    assert.equal(error?.status, 503);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]![0], 'warn');
    assert.match(lines[0]![1], /check DNS_SERVERS or resolv.conf/);
  });

  it("refuses a single-label name, which each fetcher completes with its own search domains", async () => {
    for (const hostname of ['redis', 'redis.']) {
      assert.deepEqual(await check.firstRefused([{ hostname: 'public.example', param: 'a' }, { hostname, param: 'b' }]), { param: 'b', why: 'single label', detail: `${hostname} has no dot` });
    }
  });

  it('asks each name once, all at once, and reports the first refused in the order given', async () => {
    dns.asked.length = 0;
    const hosts = [
      { hostname: 'nothing-here.example', param: 'a' },
      { hostname: '93-184-216-34.nip.test', param: 'b' },
      { hostname: '192-168-0-2.nip.test', param: 'c' },
      { hostname: '169-254-169-254.NIP.test', param: 'd' },
      { hostname: '169-254-169-254.nip.test', param: 'e' },
    ];
    assert.deepEqual(await check.firstRefused(hosts), { param: 'c', why: 'internal', detail: '192-168-0-2.nip.test resolves to 192.168.0.2 (private)' });
    const names = dns.asked.map((query) => query.split(' ')[1]!.toLowerCase());
    assert.equal(dns.asked.length, 8, dns.asked.join(', '));
    assert.equal(new Set(names).size, 4);
  });

  it(`refuses a request naming more than ${MAX_NAMES_PER_REQUEST} distinct hosts at the first beyond, before asking for any`, async () => {
    dns.asked.length = 0;
    const hosts = Array.from({ length: MAX_NAMES_PER_REQUEST + 4 }, (_, index) => ({ hostname: `host-${index % (MAX_NAMES_PER_REQUEST + 1)}.example`, param: `messages.${index}` }));
    const refusal = await check.firstRefused(hosts);
    assert.equal(refusal?.why, 'too many');
    assert.equal(refusal?.param, `messages.${MAX_NAMES_PER_REQUEST}`);
    // Counted before any is asked.
    assert.deepEqual(dns.asked, []);
    // Repeats of names already asked are not more names.
    assert.equal(await check.firstRefused(hosts.slice(0, MAX_NAMES_PER_REQUEST).concat(hosts.slice(0, 3))), null);
  });

  it("completes names with resolv.conf's search domains in getaddrinfo's order, as the fetcher's resolver does", async () => {
    // `http://metadata.google/` on a GCE machine (search google.internal), `http://vllm.default/`
    // in a Kubernetes pod (search svc.cluster.local, ndots:5).
    const searching = new HostNameCheck(none, [dns.address], 300, { domains: ['nothing.example', 'test'], ndots: 2 });
    assert.deepEqual(await searching.firstRefused(one('169-254-169-254.nip')), { param: 'p', why: 'internal', detail: '169-254-169-254.nip resolves to 169.254.169.254 (linkLocal) as 169-254-169-254.nip.test' });
    // Written with its root dot, a name is complete: no domain is added.
    assert.equal(await searching.firstRefused(one('169-254-169-254.nip.')), null);
    // A name with ndots dots is tried as given first: a public answer there is what is fetched,
    // however an internal zone answers its completions.
    const wildcard = { domains: ['wild.test'] };
    assert.equal(await new HostNameCheck(none, [dns.address], 300, { ...wildcard, ndots: 1 }).firstRefused(one('93-184-216-34.nip.test')), null);
    // With fewer (Kubernetes sets ndots:5), the completions come first, and the zone's answer wins.
    const kubernetes = new HostNameCheck(none, [dns.address], 300, { ...wildcard, ndots: 5 });
    assert.equal((await kubernetes.firstRefused(one('93-184-216-34.nip.test')))?.detail, '93-184-216-34.nip.test resolves to 10.0.0.1 (private) as 93-184-216-34.nip.test.wild.test');
  });

  it('a malformed DNS server address fails at start, not on a caller', () => {
    assert.throws(() => new HostNameCheck(none, ['not an address']), /Invalid IP address/);
  });

  it('only names are resolved: IP literals and localhost names are judged on sight', () => {
    for (const hostname of ['images.example', '169.254.169.254.nip.io', 'xn--bcher-kva.example', 'a']) assert.equal(isResolvableName(hostname), true, hostname);
    for (const hostname of ['10.0.0.1', '[::1]', '[fd00::1]', 'localhost', 'api.localhost', 'localhost.', '']) assert.equal(isResolvableName(hostname), false, hostname);
  });
});
