import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Db } from 'mongodb';
import { AccountBudgets } from '../../../api/services/billing/account-budgets.ts';
import type { LeaseTiming } from '../../../api/services/billing/lease-timing.ts';
import { AccountStore } from '../../../store/accounts.ts';
import { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import { Ledger, type LedgerOperation } from '../../../store/ledger.ts';
import { StoreClock } from '../../../store/store-clock.ts';
import type { UsageRecord, UsageStore } from '../../../store/usage.ts';
import { sweepExpiredLeases } from '../../../worker/lease-sweeper.ts';
import { budgetStores, chatCall, LedgerHeldBack, silent, type BudgetStores } from '../../helpers/budget-stores.ts';
import { waitUntil } from '../../helpers/wait-until.ts';

// A spend lease is settled by its process (retired-leases.ts), by whoever releases it as
// expired (store/expired-leases.ts), or by both, in either order, and either may die at any
// step. Its usage records must still add up to what the ledger collected for it (its capture
// plus its debit): per-key spend is read from the records, money from the ledger. The lease
// here holds 10,000 and its call cost 25,000 (an upstream's overage), so the records of the
// whole statement and a capture of the hold alone disagree by 15,000 unless a debit follows.

/** A ledger whose process is killed right after a movement of one kind lands: the movement is
 * applied, and its caller never hears back. */
class LedgerKilledAfter extends Ledger {
  private land!: () => void;
  /** Settles once the movement has landed. */
  readonly landed = new Promise<void>((resolve) => (this.land = resolve));

  constructor(
    db: Db,
    private readonly operation: LedgerOperation,
  ) {
    super(db);
  }

  override async apply(input: Parameters<Ledger['apply']>[0]) {
    const outcome = await super.apply(input);
    if (input.operation === this.operation) {
      this.land();
      await new Promise<never>(() => {});
    }
    return outcome;
  }
}

describe('the usage records of a spend lease settled by its process, by the sweeper, or both', () => {
  let database: BudgetStores['database'];
  let accounts: AccountStore;
  let ledger: Ledger;
  let leases: BudgetLeaseStore;
  let usage: UsageStore;

  before(async () => {
    ({ database, accounts, ledger, leases, usage } = await budgetStores('lease_settlement_usage'));
  });
  after(() => database.drop());

  // A lease of 10,000, which a call of 2,000 at worst leaves room in (no renewal retires it
  // early): it settles when idle for `idleMs`, or when the test closes the budgets. Its journal
  // is written 50 ms after a charge; it expires after 60 s.
  const timing = (idleMs: number): Partial<LeaseTiming> => ({ idleMs, smallLeaseIdleMs: idleMs, maxAgeMs: 60_000, tickMs: 20, journalMs: 50, expiryMs: 60_000, minLeaseMicros: 10_000, reservationsPerLease: 1 });
  /** One call of 2,000 at worst, for which the upstream reported 25,000. */
  async function overCharge(budgets: AccountBudgets, accountId: string): Promise<void> {
    assert.equal((await budgets.reserve(accountId, 2_000, chatCall, 'hint')).charge(25_000, { inputTokens: 7, outputTokens: 3 }, { allowOverage: true }), 25_000);
  }

  const recordedOf = async (accountId: string): Promise<number> => (await usage.collection.find({ account_id: accountId }).toArray()).reduce((sum, record: UsageRecord) => sum + record.spend_micros, 0);

  /** The worker's sweeper, on a store clock past the leases' 60 s expiry. */
  async function sweepAsExpired(): Promise<void> {
    const storeAhead = { command: async (command: object) => ({ ...(await database.db.command(command)), localTime: new Date(Date.now() + 61_000) }) };
    assert.ok((await sweepExpiredLeases({ ledger, leases: new BudgetLeaseStore(database.db, new StoreClock(storeAhead as never)) })) >= 1);
  }

  async function assertRecordsMatchLedger(accountId: string, spentMicros: number): Promise<void> {
    const totals = await ledger.totals(accountId);
    assert.deepEqual([totals.held_micros, totals.spent_micros], [0, spentMicros]);
    assert.equal(await recordedOf(accountId), spentMicros, 'the usage records say what the ledger collected');
  }

  it('records what was collected when the process dies before its capture and the sweeper captures the hold', async () => {
    const account = await accounts.create({ name: 'killed before capture', balanceMicros: 100_000 });
    const killedBeforeCapture = new LedgerHeldBack(database.db, 'capture');
    const dying = new AccountBudgets({ ledger: killedBeforeCapture, leases, usage, log: silent, timing: timing(300) });
    await overCharge(dying, account._id);
    // Idle, the lease settles: its journal has the whole statement, then the capture never comes.
    await killedBeforeCapture.reached;

    // The sweeper captures what the hold has, 10,000; the 15,000 beyond it were never collected,
    // so the records must not say them (they once kept the process's records of 25,000).
    await sweepAsExpired();
    await assertRecordsMatchLedger(account._id, 10_000);

    // Only paused after all, the process goes on: its capture finds the sweeper's, and it debits
    // the overage from the balance; its records then say all 25,000.
    killedBeforeCapture.openGate();
    await dying.close();
    await assertRecordsMatchLedger(account._id, 25_000);
  });

  it('records what was collected when the process dies after debiting part of its overage', async () => {
    const account = await accounts.create({ name: 'killed after debit', balanceMicros: 100_000 });
    const killedAfterDebit = new LedgerKilledAfter(database.db, 'debit');
    const dying = new AccountBudgets({ ledger: killedAfterDebit, leases, usage, log: silent, timing: timing(60_000) });
    await overCharge(dying, account._id);
    // An operator takes back all but 2,000 of the free balance: the overage's debit takes 2,000.
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: `deduct_${account._id}`, operation: 'deduct', amountMicros: 88_000 }), 'applied');
    const closing = dying.close(300);
    await killedAfterDebit.landed;

    // Its capture (10,000) and debit (2,000) landed, its records did not: the sweeper writes them
    // from the journal, less the 13,000 nobody collected.
    await sweepAsExpired();
    await assertRecordsMatchLedger(account._id, 12_000);
    await closing;
  });

  it('keeps the records at what was collected when the process settles after the sweeper and dies before its debit', async () => {
    const account = await accounts.create({ name: 'killed before debit', balanceMicros: 100_000 });
    const killedBeforeDebit = new LedgerHeldBack(database.db, 'debit');
    const late = new AccountBudgets({ ledger: killedBeforeDebit, leases, usage, log: silent, timing: timing(60_000) });
    await overCharge(late, account._id);
    await waitUntil(async () => (await leases.journal.collection.findOne({ account_id: account._id }))?.spent_micros === 25_000);

    // Its process out of touch, the lease is settled from its journal as expired: the hold is
    // captured, and the records say 10,000.
    await sweepAsExpired();
    await assertRecordsMatchLedger(account._id, 10_000);

    // Then its process settles it: the capture is the sweeper's, 15,000 are owed, and the
    // process dies before its debit. Records of the whole statement written before the debit
    // (as they once were) would say 25,000 for good: nobody settles this lease again.
    const closing = late.close();
    await killedBeforeDebit.reached;
    await assertRecordsMatchLedger(account._id, 10_000);

    // Only paused after all: the debit lands, and the records follow it.
    killedBeforeDebit.openGate();
    await closing;
    await assertRecordsMatchLedger(account._id, 25_000);
  });
});
