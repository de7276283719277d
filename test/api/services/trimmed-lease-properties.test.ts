import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { RetiredLeases } from '../../../api/services/billing/retired-leases.ts';
import { SpendLease } from '../../../api/services/billing/spend-lease.ts';
import { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import { releaseExpiredLease } from '../../../store/expired-leases.ts';
import { Ledger, type LedgerEntry } from '../../../store/ledger.ts';
import { UsageStore } from '../../../store/usage.ts';
import { silent } from '../../helpers/budget-stores.ts';
import { testDatabase } from '../../helpers/engines.ts';

// Property: a lease whose process trims it while a call still runs, and that a sweeper (or a
// caller short of money) releases as expired at the same time, once or twice, never returns
// money twice. Whatever the order, the account ends holding only an unrelated task's hold, its
// spend is the call's price (captured by the settlement, or debited by it when the release won),
// and no entry of the chain is negative or loses money. The process side is the real RetiredLeases, the release
// the real releaseExpiredLease, both against the suite's FerretDB.

const SEED = 40_411;
const RUNS = 25;
const OPENING = 10_000_000;
const TASK_HOLD = 400_000;
const call = { keyId: 'key_property', modelId: 'gpt-4o-mini', kind: 'chat' as const };

const scenario = fc.record({
  leaseMicros: fc.integer({ min: 2, max: 2_000_000 }),
  reservedShare: fc.double({ min: 0.01, max: 1, noNaN: true }),
  spentShare: fc.double({ min: 0, max: 1, noNaN: true }),
  /** Slot of the trim; none when null. */
  trimSlot: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
  /** Slot at which the call ends and the lease settles. */
  settleSlot: fc.integer({ min: 0, max: 4 }),
  /** Slots of expired-lease releases (the sweeper and a caller may both run one). */
  releaseSlots: fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 2 }),
});

describe('a trimmed spend lease released as expired at the same time', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let ledger: Ledger;
  let leases: BudgetLeaseStore;
  let usage: UsageStore;
  before(async () => {
    database = await testDatabase('trimmed_lease_properties');
    ledger = new Ledger(database.db);
    leases = new BudgetLeaseStore(database.db);
    usage = new UsageStore(database.db);
    await Ledger.ensureIndexes(database.db);
  });
  after(() => database.drop());

  it('returns every micro-USD once, whichever of trim, settlement and release lands first', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async ({ leaseMicros, reservedShare, spentShare, trimSlot, settleSlot, releaseSlots }) => {
        const accountId = `acct_trim_${run++}_${Date.now()}`;
        const reference = `lease_${accountId}`;
        const base = { accountId, keyId: null };
        await ledger.apply({ ...base, reference: `${accountId}:opening`, operation: 'credit', amountMicros: OPENING });
        await ledger.apply({ ...base, reference: `task_${accountId}`, operation: 'hold', amountMicros: TASK_HOLD });
        const now = Date.now();
        await leases.open({ _id: reference, account_id: accountId, amount_micros: leaseMicros, opened_at: new Date(now), expires_at: new Date(now) });
        assert.equal(await ledger.apply({ ...base, reference, operation: 'hold', amountMicros: leaseMicros }), 'applied');

        const lease = new SpendLease(reference, accountId, leaseMicros, now, now, 60_000);
        const reservedMicros = Math.max(1, Math.floor(leaseMicros * reservedShare));
        const priceMicros = Math.floor(reservedMicros * spentShare);
        const reservation = lease.reserve(reservedMicros, call, now);
        lease.close();
        const retired = new RetiredLeases({ ledger, leases, usage, log: silent });
        retired.add(lease);

        for (let slot = 0; slot <= 4; slot++) {
          const work: Promise<unknown>[] = [];
          if (trimSlot === slot) work.push(retired.trimRest(lease));
          if (settleSlot === slot) {
            reservation.charge(priceMicros, { outputTokens: 1 }, { allowOverage: false });
            retired.settle(lease);
            work.push(retired.settlementOf(lease)!);
          }
          for (const releaseSlot of releaseSlots) if (releaseSlot === slot) work.push(releaseExpiredLease({ ledger, leases }, { _id: reference, account_id: accountId }));
          await Promise.all(work);
        }

        const totals = await ledger.totals(accountId);
        assert.equal(totals.held_micros, TASK_HOLD, 'only the task hold is left');
        assert.equal(totals.spent_micros, priceMicros, "the call is paid, whether its process settled first or the release won");
        assert.equal(totals.balance_micros, OPENING - TASK_HOLD - totals.spent_micros);
        const chain = await ledger.entries.find({ account_id: accountId }).sort({ seq: 1 }).toArray();
        chain.forEach((entry: LedgerEntry) => {
          assert.ok(entry.balance_micros >= 0 && entry.held_micros >= 0, `seq ${entry.seq} is not negative`);
          assert.equal(entry.balance_micros + entry.held_micros + entry.spent_micros, OPENING, `seq ${entry.seq} conserves money`);
        });
        const settledWith = chain.filter((entry) => entry.reference === reference && (entry.operation === 'capture' || entry.operation === 'release'));
        assert.equal(settledWith.length, 1, 'the lease is settled or released exactly once');
        const debits = chain.filter((entry) => entry.reference === reference && entry.operation === 'debit');
        assert.ok(debits.length <= 1, 'its calls are debited at most once');
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  });
});
