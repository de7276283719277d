import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FailuresByAddress } from '../../core/failures-by-address.ts';

// The per-address count behind the unknown-key throttle and the operator tokens' (their own
// tests cover windows, give-backs and /64 grouping through them).

describe('failed attempts per address', () => {
  it('keeps at most 100,000 callers: past that, the counts start again', () => {
    const failures = new FailuresByAddress({ windowMs: 600_000, failures: 1 }, () => 1_000);
    assert.equal(failures.admit('198.51.100.1'), 0);
    assert.ok(failures.admit('198.51.100.1') > 0, 'one failure allowed');
    for (let index = 1; index < 100_000; index++) failures.admit(`2001:db8:${(index >> 16).toString(16)}:${(index & 0xffff).toString(16)}::1`);
    // The 100,001st caller clears them all.
    assert.equal(failures.admit('198.51.100.2'), 0);
    assert.equal(failures.admit('198.51.100.1'), 0, 'counted from nothing again');
  });
});
