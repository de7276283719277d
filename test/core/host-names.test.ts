import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_LOOKUPS_IN_FLIGHT, firstRefusedName, isResolvableName, systemResolver, type HostResolver } from '../../core/host-names.ts';
import { parseOutboundAllowlist } from '../../core/outbound-guard.ts';

const none = parseOutboundAllowlist('');

function failing(code: string): Error {
  return Object.assign(new Error(`getaddrinfo ${code}`), { code });
}

describe('caller names resolved before anyone is sent there', () => {
  it("reads the system's resolver, hosts file included: localhost resolves to loopback", async () => {
    // Every Linux hosts file names localhost; isResolvableName keeps it from here in the app
    // (it is judged on sight), so this is the one name that proves the real lookup runs.
    const refusal = await firstRefusedName([{ hostname: 'localhost', param: 'a' }], none, systemResolver);
    assert.equal(refusal?.why, 'internal');
    assert.match(refusal?.detail ?? '', /^localhost resolves to (127\.0\.0\.1|::1) \(loopback\)$/);
    assert.equal(await firstRefusedName([{ hostname: 'localhost', param: 'a' }], parseOutboundAllowlist('loopback'), systemResolver), null);
  });

  it('refuses a name when any one of its addresses is internal', async () => {
    const resolve: HostResolver = async () => ['93.184.216.34', '2606:2800:220:1::1', '10.0.0.7'];
    assert.deepEqual(await firstRefusedName([{ hostname: 'mixed.example', param: 'p' }], none, resolve), { param: 'p', why: 'internal', detail: 'mixed.example resolves to 10.0.0.7 (private)' });
  });

  it('passes a name that does not exist or cannot (the fetcher finds nothing either) and one that resolves publicly', async () => {
    const resolve: HostResolver = async (name) => {
      if (name === 'public.example') return ['93.184.216.34'];
      throw failing(name === 'gone.example' ? 'ENOTFOUND' : 'ENODATA');
    };
    const hosts = ['public.example', 'gone.example', 'no-records.example'].map((hostname) => ({ hostname, param: hostname }));
    assert.equal(await firstRefusedName(hosts, none, resolve), null);
    // A name too long for DNS: getaddrinfo's EINVAL, from the real resolver.
    const tooLong = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.example`;
    assert.equal(await firstRefusedName([{ hostname: tooLong, param: 'p' }], none, systemResolver), null);
  });

  it('a resolver failure or a name slower than the deadline is "unresolved", not let through', async () => {
    const broken: HostResolver = async () => {
      throw failing('EAI_AGAIN');
    };
    assert.deepEqual(await firstRefusedName([{ hostname: 'flaky.example', param: 'p' }], none, broken), { param: 'p', why: 'unresolved', detail: 'flaky.example: EAI_AGAIN' });
    // An answer that comes after the deadline (a public one, even) does not count.
    let answered!: Promise<unknown>;
    const slow: HostResolver = () => {
      const answer = new Promise<string[]>((settle) => setTimeout(() => settle(['93.184.216.34']), 300));
      answered = answer;
      return answer;
    };
    const started = performance.now();
    assert.deepEqual(await firstRefusedName([{ hostname: 'slow.example', param: 'p' }], none, slow, 50), { param: 'p', why: 'unresolved', detail: 'slow.example did not resolve within 50 ms' });
    assert.ok(performance.now() - started < 250);
    // Its slot is given back when the lookup ends, for the tests after this one.
    await answered;
  });

  it(`runs at most ${MAX_LOOKUPS_IN_FLIGHT} lookups at once, keeps a slot until its lookup ends, and never starts one whose caller gave up`, async () => {
    let running = 0;
    let most = 0;
    const started: string[] = [];
    const answers = new Map<string, () => void>();
    const held: HostResolver = (name) => {
      started.push(name);
      running += 1;
      most = Math.max(most, running);
      return new Promise((settle) =>
        answers.set(name, () => {
          running -= 1;
          settle(['93.184.216.34']);
        }),
      );
    };
    // Two slow names fill the slots past their callers' deadline; a third caller waits behind
    // them and gives up too, so its lookup never starts; a fourth, after the slots are free,
    // is answered.
    const slowOnes = ['one.example', 'two.example'].map((hostname) => firstRefusedName([{ hostname, param: hostname }], none, held, 40));
    const third = await firstRefusedName([{ hostname: 'three.example', param: 'p' }], none, held, 40);
    assert.equal(third?.why, 'unresolved');
    for (const verdict of await Promise.all(slowOnes)) assert.equal(verdict?.why, 'unresolved');
    assert.deepEqual(started, ['one.example', 'two.example']);
    // The callers are gone, the lookups are not: their slots stay taken until they end.
    const fourth = firstRefusedName([{ hostname: 'four.example', param: 'p' }], none, held, 5_000);
    await new Promise((settle) => setTimeout(settle, 20));
    assert.deepEqual(started, ['one.example', 'two.example']);
    answers.get('one.example')!();
    await new Promise((settle) => setTimeout(settle, 20));
    assert.deepEqual(started, ['one.example', 'two.example', 'four.example']);
    answers.get('four.example')!();
    answers.get('two.example')!();
    assert.equal(await fourth, null);
    assert.equal(most, MAX_LOOKUPS_IN_FLIGHT);
  });

  it('asks each name once, all at once, and reports the first refused in the order given', async () => {
    const asked: string[] = [];
    const resolve: HostResolver = async (name) => {
      asked.push(name);
      // The later name answers first: the report still follows the order of the fields.
      await new Promise((settle) => setTimeout(settle, name === 'first.example' ? 30 : 0));
      return name === 'first.example' ? ['169.254.169.254'] : ['192.168.0.2'];
    };
    const hosts = [
      { hostname: 'First.Example', param: 'a' },
      { hostname: 'second.example', param: 'b' },
      { hostname: 'first.example', param: 'c' },
    ];
    const refusal = await firstRefusedName(hosts, none, resolve);
    assert.deepEqual(refusal, { param: 'a', why: 'internal', detail: 'first.example resolves to 169.254.169.254 (linkLocal)' });
    assert.deepEqual(asked.sort(), ['first.example', 'second.example']);
  });

  it('only names are resolved: IP literals and localhost names are judged on sight', () => {
    for (const hostname of ['images.example', '169.254.169.254.nip.io', 'xn--bcher-kva.example', 'a']) assert.equal(isResolvableName(hostname), true, hostname);
    for (const hostname of ['10.0.0.1', '[::1]', '[fd00::1]', 'localhost', 'api.localhost', 'localhost.', '']) assert.equal(isResolvableName(hostname), false, hostname);
  });
});
