import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { balanceRefusal } from '../../../api/services/billing/insufficient-balance.ts';

// The refusal of a request the free balance cannot cover, by where the rest of the money is.

const refuse = (neededMicros: number, availableMicros: number, unanswered: { micros: number; pendingMicros: number; retryAfterSeconds: number } | null) =>
  balanceRefusal(neededMicros, 'this request may cost up to $X', { availableMicros, heldMicros: 0, unanswered }, 'Add credits and retry.');

describe('balance refusals', () => {
  it('is a 403 when no unanswered lease would make up the difference', () => {
    assert.equal(refuse(3_000_000, 1_000_000, null).code, 'insufficient_balance');
    assert.equal(refuse(3_000_000, 1_000_000, { micros: 1_000_000, pendingMicros: 0, retryAfterSeconds: 20 }).code, 'insufficient_balance');
  });

  it("is a 503 to retry once a silent process's leases expire", () => {
    const refused = refuse(2_000_000, 1_000_000, { micros: 1_000_000, pendingMicros: 0, retryAfterSeconds: 20 });
    assert.equal(refused.code, 'service_unavailable');
    assert.equal(refused.headers['retry-after'], '20');
    assert.match(refused.message, /but \$1\.000000 more is held by a gateway process that stopped responding\. It returns to the balance within 20 s/);
  });

  it('is a 503 to retry in a second when a lease just opened by a live process would cover it, whatever silent ones hold', () => {
    const pendingOnly = refuse(2_000_000, 1_000_000, { micros: 1_000_000, pendingMicros: 1_000_000, retryAfterSeconds: 1 });
    assert.equal(pendingOnly.headers['retry-after'], '1');
    assert.match(pendingOnly.message, /but \$1\.000000 more is in a lease another gateway process has just opened and is being asked to give back\. It should come back within a second/);
    const mixed = refuse(2_000_000, 1_000_000, { micros: 3_000_000, pendingMicros: 1_000_000, retryAfterSeconds: 25 });
    assert.equal(mixed.headers['retry-after'], '1', 'the pending lease alone covers it');
    assert.match(mixed.message, /\$1\.000000 more is in a lease .*, and \$2\.000000 is held by a gateway process that stopped responding\. That lease's money should come back within a second/);
    // The pending lease alone does not cover it: the wait is the silent ones'.
    const short = refuse(4_000_000, 1_000_000, { micros: 3_000_000, pendingMicros: 1_000_000, retryAfterSeconds: 25 });
    assert.equal(short.headers['retry-after'], '25');
    assert.match(short.message, /\$2\.000000 more is held by a gateway process that stopped responding, and \$1\.000000 is in a lease .*\. It returns to the balance within 25 s/);
  });
});
