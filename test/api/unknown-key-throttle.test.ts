import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MongoNetworkError } from 'mongodb';
import type { GatewayError } from '../../core/errors.ts';
import { callerOf } from '../../core/failures-by-address.ts';
import { READS_PER_WINDOW, STORE_FAILURE_MEMORY_MS, UnknownKeyThrottle, WINDOW_MS } from '../../api/plugins/unknown-key-throttle.ts';

// The count of store reads for keys no cache holds, per caller address and window of 10 s, on a
// clock of the test's own (the plugin's wiring is tested in auth.test.ts).

/** The refusal of a read, as the gateway's error it is unless the store failed. */
function refusal(throttle: UnknownKeyThrottle, address: string): GatewayError | undefined {
  return throttle.admitRead(address) as GatewayError | undefined;
}

describe('reads for unknown keys, per caller', () => {
  it('counts a read when it is admitted, refuses past the window\'s reads until the next window, and takes back reads that found their key', () => {
    let now = 5 * WINDOW_MS + 1_000;
    const throttle = new UnknownKeyThrottle(() => now);
    // Admitted at once, none yet back: the count holds them all the same.
    for (let index = 0; index < READS_PER_WINDOW; index++) assert.equal(refusal(throttle, '192.0.2.1'), undefined, `read ${index + 1}`);
    const refused = refusal(throttle, '192.0.2.1');
    assert.equal(refused?.status, 429);
    assert.equal(refused?.headers['retry-after'], '9');
    assert.equal(refusal(throttle, '192.0.2.2'), undefined, 'another address has its own count');
    // A read that found its key gives its place back.
    throttle.keyFound('192.0.2.1');
    assert.equal(refusal(throttle, '192.0.2.1'), undefined);
    now = 6 * WINDOW_MS - 1;
    assert.equal(refusal(throttle, '192.0.2.1')?.headers['retry-after'], '1');
    now = 6 * WINDOW_MS;
    assert.equal(refusal(throttle, '192.0.2.1'), undefined, 'a new window starts from nothing');
  });

  it('does not count reads the store failed, and refuses with the store\'s 503 while it fails them', () => {
    let now = 3 * WINDOW_MS;
    const throttle = new UnknownKeyThrottle(() => now);
    for (let index = 0; index < READS_PER_WINDOW; index++) assert.equal(refusal(throttle, '192.0.2.9'), undefined);
    // Every read failed: none of them counts, so the address may read again.
    const outage = new MongoNetworkError('connection refused (simulated)');
    for (let index = 0; index < READS_PER_WINDOW; index++) throttle.readFailed('192.0.2.9', outage);
    for (let index = 0; index < READS_PER_WINDOW; index++) assert.equal(refusal(throttle, '192.0.2.9'), undefined, `read ${index + 1} after the failures`);
    // Past the window's reads, while reads fail, a refusal is the store's error (answered 503
    // as in any outage), not the caller's 429.
    assert.equal(throttle.admitRead('192.0.2.9'), outage);
    now += STORE_FAILURE_MEMORY_MS;
    assert.equal(refusal(throttle, '192.0.2.9')?.status, 429, 'no read failed lately');
    // A read that failed for another reason (a bug) is no outage: it stays counted, and the
    // refusal stays a 429.
    throttle.readFailed('192.0.2.9', new Error('a bug'));
    assert.equal(refusal(throttle, '192.0.2.9')?.status, 429);
  });

  it('counts an IPv6 caller per /64, and an IPv4-mapped address as its IPv4 one', () => {
    assert.equal(callerOf('2001:db8:1:2:aaaa::1'), callerOf('2001:db8:1:2:bbbb:cccc:dddd:eeee'));
    assert.notEqual(callerOf('2001:db8:1:2::1'), callerOf('2001:db8:1:3::1'));
    assert.equal(callerOf('::ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(callerOf('192.0.2.1'), '192.0.2.1');
    const throttle = new UnknownKeyThrottle(() => 1_000);
    for (let index = 0; index < READS_PER_WINDOW; index++) assert.equal(refusal(throttle, `2001:db8:1:2::${index.toString(16)}`), undefined);
    assert.equal(refusal(throttle, '2001:db8:1:2:ffff::1')?.status, 429);
    assert.equal(refusal(throttle, '2001:db8:1:3::1'), undefined);
  });
});
