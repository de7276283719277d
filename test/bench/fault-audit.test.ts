import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { auditTasksAndLedger, type AuditEntry, type AuditTask } from '../../bench/lib/fault-audit.ts';

// The audit is what makes `npm run bench:faults` fail: each promise it checks (nothing lost,
// nothing charged twice, a failure or a refused submission never charged, no hold left open)
// must be caught when broken, and a clean run must pass.

const PRICE = 160_000;

/** A ledger built the way the store writes it: running totals on every entry. */
function ledger(operations: Array<[reference: string, operation: AuditEntry['operation'], amount: number]>): AuditEntry[] {
  let balance = 0;
  let held = 0;
  let spent = 0;
  return operations.map(([reference, operation, amount], seq) => {
    if (operation === 'credit') balance += amount;
    if (operation === 'hold') (balance -= amount), (held += amount);
    if (operation === 'capture') (held -= amount), (spent += amount);
    if (operation === 'release') (held -= amount), (balance += amount);
    if (operation === 'debit') (balance -= amount), (spent += amount);
    return { seq, reference, operation, amount_micros: amount, balance_micros: balance, held_micros: held, spent_micros: spent };
  });
}

const task = (id: string, status: string): AuditTask => ({ _id: id, status, price_micros: PRICE });

describe('the faults bench audit', () => {
  it('passes a clean run and adds up its money', () => {
    const audit = auditTasksAndLedger({
      acceptedIds: ['task_ok', 'task_bad'],
      tasks: [task('task_ok', 'succeeded'), task('task_bad', 'failed'), task('task_refused', 'failed')],
      entries: ledger([
        ['credit_1', 'credit', 1_000_000],
        ['task_ok', 'hold', PRICE],
        ['task_bad', 'hold', PRICE],
        ['task_refused', 'hold', PRICE],
        ['task_ok', 'capture', PRICE],
        ['task_bad', 'release', PRICE],
        ['task_refused', 'release', PRICE],
        ['lease_1', 'debit', 606],
      ]),
    });
    assert.deepEqual(
      [audit.accepted, audit.succeeded, audit.failed, audit.lost, audit.doubleCharged, audit.unsettled, audit.unacknowledged, audit.unacknowledgedCharged],
      [2, 1, 1, [], [], [], 1, []],
    );
    assert.deepEqual([audit.creditedMicros, audit.videoCapturedMicros, audit.succeededPriceMicros, audit.otherSpentMicros], [1_000_000, PRICE, PRICE, 606]);
    assert.deepEqual(audit.totals, { balance_micros: 1_000_000 - PRICE - 606, held_micros: 0, spent_micros: PRICE + 606 });
  });

  it('finds an accepted task that is missing or never ended', () => {
    const audit = auditTasksAndLedger({ acceptedIds: ['task_gone', 'task_stuck'], tasks: [task('task_stuck', 'running')], entries: [] });
    assert.deepEqual(audit.lost, ['task_gone', 'task_stuck']);
  });

  it('finds a task charged twice, a failure charged, and a wrong amount', () => {
    const audit = auditTasksAndLedger({
      acceptedIds: ['task_twice', 'task_failed', 'task_wrong'],
      tasks: [task('task_twice', 'succeeded'), task('task_failed', 'failed'), task('task_wrong', 'succeeded')],
      entries: ledger([
        ['credit_1', 'credit', 1_000_000],
        ['task_twice', 'capture', PRICE],
        ['task_twice', 'debit', PRICE],
        ['task_failed', 'capture', PRICE],
        ['task_wrong', 'capture', PRICE - 1],
      ]),
    });
    assert.deepEqual(audit.doubleCharged.sort(), ['task_failed', 'task_twice', 'task_wrong']);
  });

  it('finds a hold never settled, and charges for submissions the caller saw refused', () => {
    const audit = auditTasksAndLedger({
      acceptedIds: ['task_open_hold'],
      tasks: [task('task_open_hold', 'failed'), task('task_refused', 'succeeded')],
      entries: ledger([
        ['credit_1', 'credit', 1_000_000],
        ['task_open_hold', 'hold', PRICE],
        ['task_refused', 'hold', PRICE],
        ['task_refused', 'capture', PRICE],
        ['task_no_document', 'debit', PRICE],
      ]),
    });
    assert.deepEqual(audit.unsettled, ['task_open_hold']);
    assert.deepEqual(audit.unacknowledgedCharged.sort(), ['task_no_document', 'task_refused']);
    assert.equal(audit.totals.held_micros, PRICE);
  });
});
