import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountBudgets, type AccountBudgetsOptions } from '../../../api/services/billing/account-budgets.ts';
import type { LeaseTiming } from '../../../api/services/billing/lease-timing.ts';
import { AccountStore } from '../../../store/accounts.ts';
import { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import { releaseExpiredLease } from '../../../store/expired-leases.ts';
import { Ledger } from '../../../store/ledger.ts';
import { UsageStore } from '../../../store/usage.ts';
import { sweepExpiredLeases } from '../../../worker/lease-sweeper.ts';
import { testDatabase } from '../../helpers/engines.ts';
import { chatCall, silent } from '../../helpers/budget-stores.ts';
import { settledAccount } from '../../helpers/settled-account.ts';

// A live api process that loses touch with the store for a while: it cannot push its spend
// lease's expiry forward, or it cannot settle. It must stop spending from a lease the sweeper
// may be handing back, and the calls it served must be charged all the same, once it can.
// Everything runs on the suite's real FerretDB; only the failing writes are made to fail.

const BALANCE = 20_000_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Lease documents whose expiry can never be pushed forward: the store is out of reach for that. */
class LeasesThatCannotExtend extends BudgetLeaseStore {
  override async extend(): Promise<boolean> {
    throw new Error('connection to the store timed out');
  }
}

/** A ledger whose first `failures` captures fail, as they do while the store is away. */
class LedgerAwayForCaptures extends Ledger {
  constructor(
    db: ConstructorParameters<typeof Ledger>[0],
    public failures: number,
  ) {
    super(db);
  }

  override async apply(input: Parameters<Ledger['apply']>[0]): ReturnType<Ledger['apply']> {
    if (input.operation === 'capture' && this.failures > 0) {
      this.failures -= 1;
      throw new Error('connection to the store timed out');
    }
    return super.apply(input);
  }
}

/** Lease documents whose extension runs late: the store stalled, or the driver retried the write
 * after a failover. It still runs, and matches: the document's expiry is still after the tick's. */
class LeasesExtendedLate extends BudgetLeaseStore {
  writesAt = 0;
  override async extend(reference: string, expiresAt: Date, now: Date): Promise<boolean> {
    await sleep(this.writesAt - Date.now());
    return super.extend(reference, expiresAt, now);
  }
}

describe('a process that loses touch with the store keeps the money right', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let accounts: AccountStore;
  let ledger: Ledger;
  let leases: BudgetLeaseStore;

  before(async () => {
    database = await testDatabase('lease_out_of_touch');
    accounts = new AccountStore(database.db);
    ledger = new Ledger(database.db);
    leases = new BudgetLeaseStore(database.db);
  });
  after(() => database.drop());

  function apiProcess(timing: Partial<LeaseTiming>, stores: { leases?: BudgetLeaseStore; ledger?: Ledger; log?: AccountBudgetsOptions['log'] } = {}): AccountBudgets {
    return new AccountBudgets({
      ledger: stores.ledger ?? ledger,
      leases: stores.leases ?? leases,
      usage: new UsageStore(database.db),
      log: stores.log ?? silent,
      timing: { idleMs: 60_000, smallLeaseIdleMs: 60_000, tickMs: 20, ...timing },
    });
  }

  const leasesOf = (accountId: string) => leases.collection.find({ account_id: accountId }).sort({ opened_at: 1 }).toArray();

  it('takes no new reservations from a lease it could not extend, and charges its calls after the sweeper released it', async () => {
    const account = await accounts.create({ name: 'cannot-extend', balanceMicros: BALANCE });
    const holder = apiProcess({ expiryMs: 2_000 }, { leases: new LeasesThatCannotExtend(database.db) });
    const first = await holder.reserve(account._id, 10_000, chatCall, 'hint');
    const second = holder.reserve(account._id, 10_000, chatCall, 'hint');
    assert.ok(!(second instanceof Promise), 'a lease in good standing is reserved from in memory');
    const [stale] = await leasesOf(account._id);

    // 300 ms before the unextended expiry: inside the last quarter of it.
    await sleep(stale!.expires_at.getTime() - Date.now() - 300);
    const third = await holder.reserve(account._id, 10_000, chatCall, 'hint');
    const open = await leasesOf(account._id);
    assert.equal(open.length, 2, 'the call took a new lease, not the one about to expire');

    // The sweeper finds the first lease expired and hands its hold back, calls still running on it.
    await sleep(stale!.expires_at.getTime() - Date.now() + 50);
    assert.equal(await sweepExpiredLeases({ ledger, leases }), 1);
    assert.ok(await ledger.find(stale!.account_id, stale!._id, 'release'), 'released by the sweeper');

    first.charge(4_000, { outputTokens: 1 }, { allowOverage: false });
    second.charge(3_000, { outputTokens: 1 }, { allowOverage: false });
    third.charge(6_000, { outputTokens: 1 }, { allowOverage: false });
    await holder.close();
    const after = await settledAccount(accounts, account._id);
    assert.equal(after.spent_micros, 13_000, 'every call is paid, the two on the released lease included');
    assert.equal(after.balance_micros, BALANCE - 13_000);
    assert.equal((await ledger.find(stale!.account_id, stale!._id, 'debit'))?.amount_micros, 7_000, 'debited from the balance when its lease settled');
  });

  it('stops spending from a lease as soon as an extension finds it released elsewhere', async () => {
    const account = await accounts.create({ name: 'released-elsewhere', balanceMicros: BALANCE });
    // Extended once less than 1 s is left, i.e. about 1 s after it opened.
    const warnings: string[] = [];
    const holder = apiProcess({ expiryMs: 2_000 }, { log: { warn: (_details: unknown, message?: string) => void warnings.push(String(message)), error() {} } });
    const first = await holder.reserve(account._id, 10_000, chatCall, 'hint');
    const [lease] = await leasesOf(account._id);
    // Another process took it for a dead one's (a clock far off, a long pause) and released it.
    assert.equal(await releaseExpiredLease({ ledger, leases }, lease!), 'applied');

    await sleep(lease!.opened_at.getTime() + 1_250 - Date.now());
    const second = holder.reserve(account._id, 10_000, chatCall, 'hint');
    assert.ok(second instanceof Promise, 'the released lease takes no more calls');
    (await second).charge(6_000, { outputTokens: 1 }, { allowOverage: false });
    const open = await leasesOf(account._id);
    assert.equal(open.length, 1);
    assert.notEqual(open[0]!._id, lease!._id, 'a new lease holds the money of the next call');

    // The call still running on it keeps the lease from settling: it is not extended again.
    await sleep(200);
    assert.deepEqual(warnings, ['a spend lease expired before it could be extended; it takes no more calls']);
    first.charge(4_000, { outputTokens: 1 }, { allowOverage: false });
    await holder.close();
    const after = await settledAccount(accounts, account._id);
    assert.equal(after.spent_micros, 10_000);
    assert.equal(after.balance_micros, BALANCE - 10_000);
    assert.equal((await ledger.find(lease!.account_id, lease!._id, 'debit'))?.amount_micros, 4_000);
  });

  it('does not trust an extension the store answered too late to be sure the lease was not released meanwhile', async () => {
    const account = await accounts.create({ name: 'extended-late', balanceMicros: BALANCE });
    const late = new LeasesExtendedLate(database.db);
    const warnings: string[] = [];
    const holder = apiProcess({ expiryMs: 2_000 }, { leases: late, log: { warn: (_details: unknown, message?: string) => void warnings.push(String(message)), error() {} } });
    const first = await holder.reserve(account._id, 10_000, chatCall, 'hint');
    const [lease] = await leasesOf(account._id);
    // Asked for at about 1 s (half the expiry left), written at 1.7 s: inside the last quarter,
    // where the sweeper's clock, or a process asking the money back, may already have it expired.
    late.writesAt = lease!.expires_at.getTime() - 300;
    while (warnings.length === 0 && Date.now() < lease!.expires_at.getTime() + 1_000) await sleep(20);
    assert.deepEqual(warnings, ['a spend lease was extended too late to be sure nobody released it meanwhile; it takes no more calls']);
    assert.ok((await leases.collection.findOne({ _id: lease!._id }))!.expires_at > lease!.expires_at, 'the store did take the late write');

    const second = holder.reserve(account._id, 10_000, chatCall, 'hint');
    assert.ok(second instanceof Promise, 'the lease takes no more calls, though its new expiry is far off');
    (await second).charge(6_000, { outputTokens: 1 }, { allowOverage: false });
    first.charge(4_000, { outputTokens: 1 }, { allowOverage: false });
    await holder.close();
    const after = await settledAccount(accounts, account._id);
    assert.equal(after.spent_micros, 10_000);
    assert.equal(after.balance_micros, BALANCE - 10_000);
  });

  it('keeps trying to settle a lease until the store takes the capture', async () => {
    const account = await accounts.create({ name: 'settles-late', balanceMicros: BALANCE });
    const away = new LedgerAwayForCaptures(database.db, 8);
    const budget = apiProcess({ idleMs: 50, smallLeaseIdleMs: 50, settleRetryMaxMs: 20 }, { ledger: away });
    (await budget.reserve(account._id, 10_000, chatCall, 'hint')).charge(4_000, { outputTokens: 1 }, { allowOverage: false });

    const after = await settledAccount(accounts, account._id);
    assert.equal(away.failures, 0, 'all eight attempts failed before one landed');
    assert.equal(after.spent_micros, 4_000);
    assert.equal(after.balance_micros, BALANCE - 4_000);
    await budget.close();
  });
});
