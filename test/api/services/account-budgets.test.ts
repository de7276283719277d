import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountBudgets } from '../../../api/services/billing/account-budgets.ts';
import type { LeaseTiming } from '../../../api/services/billing/lease-timing.ts';
import type { Reservation } from '../../../api/services/billing/spend-lease.ts';
import { GatewayError } from '../../../core/errors.ts';
import { AccountStore } from '../../../store/accounts.ts';
import { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import { StoreClock } from '../../../store/store-clock.ts';
import { Ledger } from '../../../store/ledger.ts';
import { UsageStore, type UsageRecord } from '../../../store/usage.ts';
import { sweepExpiredLeases } from '../../../worker/lease-sweeper.ts';
import { connectDatabase } from '../../../store/database.ts';
import { budgetStores, chatCall, LedgerHeldBack, silent, type BudgetStores } from '../../helpers/budget-stores.ts';
import { waitUntil } from '../../helpers/wait-until.ts';
import { settledAccount } from '../../helpers/settled-account.ts';

// Spend leases against the real store: many calls, one hold; exact money whatever the
// concurrency; two API processes on one account never spend more than it has; a process that
// dies with a lease open leaves nothing held once the sweeper has run.

describe('spend leases (account budgets)', () => {
  let database: BudgetStores['database'];
  let accounts: AccountStore;
  let ledger: Ledger;
  let leases: BudgetLeaseStore;
  let usage: UsageStore;

  before(async () => {
    ({ database, accounts, ledger, leases, usage } = await budgetStores('budgets'));
  });
  after(() => database.drop());

  function budgets(timing: Partial<LeaseTiming> = {}): AccountBudgets {
    return new AccountBudgets({ ledger, leases, usage, log: silent, timing: { idleMs: 50, smallLeaseIdleMs: 50, tickMs: 20, ...timing } });
  }

  const settled = (accountId: string) => settledAccount(accounts, accountId);

  function usageOf(accountId: string): Promise<UsageRecord[]> {
    return usage.collection.find({ account_id: accountId }).toArray();
  }

  it('pays 200 concurrent calls from one hold and settles the exact total', async () => {
    const account = await accounts.create({ name: 'many', balanceMicros: 5_000_000 });
    const budget = budgets();
    const reservations = await Promise.all(Array.from({ length: 200 }, () => budget.reserve(account._id, 2_000, chatCall, 'hint')));
    reservations.forEach((reservation, index) => reservation.charge(1_000 + (index % 1_000), { inputTokens: 10, outputTokens: 1 }, { allowOverage: false }));
    const total = reservations.reduce((sum, _reservation, index) => sum + 1_000 + (index % 1_000), 0);
    await budget.close();

    const after = await settled(account._id);
    assert.equal(after.spent_micros, total);
    assert.equal(after.balance_micros, 5_000_000 - total);
    const entries = await ledger.entries.find({ account_id: account._id, operation: { $ne: 'credit' } }).toArray();
    assert.deepEqual(entries.map((entry) => entry.operation).sort(), ['capture', 'hold']);
    const [record, ...others] = await usageOf(account._id);
    assert.equal(others.length, 0);
    assert.equal(record!.requests, 200);
    assert.equal(record!.input_tokens, 2_000);
    assert.equal(record!.spend_micros, total);
    assert.equal(await leases.collection.countDocuments({ account_id: account._id }), 0);
  });

  it('refuses a call the balance cannot cover, holding nothing, and serves a smaller one', async () => {
    const account = await accounts.create({ name: 'poor', balanceMicros: 5_000 });
    const budget = budgets();
    await assert.rejects(async () => budget.reserve(account._id, 9_800, chatCall, 'or lower max_tokens'), (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, 'insufficient_balance');
      assert.match(error.message, /up to \$0\.009800 and the account has at most \$0\.005000, .*\. Add credits, or lower max_tokens, and retry\./);
      return true;
    });
    assert.equal((await accounts.find(account._id))!.held_micros, 0);
    const reservation = await budget.reserve(account._id, 4_000, chatCall, 'hint');
    assert.equal((await accounts.find(account._id))!.held_micros, 5_000, 'a small balance is leased whole');
    // The lease holds the whole balance now: the refusal still counts it, as the admin API's
    // available_usd does, rather than reading "$0.000000 available".
    await assert.rejects(async () => budget.reserve(account._id, 9_800, chatCall, 'or lower max_tokens'), (error: unknown) => {
      assert.ok(error instanceof GatewayError && error.code === 'insufficient_balance', String(error));
      assert.match(error.message, /the account has at most \$0\.005000, counting what is held/);
      return true;
    });
    reservation.charge(1_234, { outputTokens: 5 }, { allowOverage: false });
    const after = await settled(account._id);
    assert.equal(after.balance_micros, 5_000 - 1_234);
    // An account with nothing at all is told so, not "at most $0.000000, counting what is held".
    const empty = await accounts.create({ name: 'empty', balanceMicros: 0 });
    await assert.rejects(async () => budget.reserve(empty._id, 9_800, chatCall, 'or lower max_tokens'), (error: unknown) => {
      assert.ok(error instanceof GatewayError && error.code === 'insufficient_balance', String(error));
      assert.match(error.message, /^Insufficient balance: this request may cost up to \$0\.009800 and the account has no balance, nor anything held for requests in progress\. Add credits/);
      return true;
    });
    await budget.close();
  });

  it('releases a reservation whole and records no usage for a failed call', async () => {
    const account = await accounts.create({ name: 'failed', balanceMicros: 1_000_000 });
    const budget = budgets();
    (await budget.reserve(account._id, 50_000, chatCall, 'hint')).release();
    const after = await settled(account._id);
    assert.equal(after.balance_micros, 1_000_000);
    assert.equal(after.spent_micros, 0);
    assert.deepEqual(await usageOf(account._id), []);
    await budget.close();
  });

  it('caps a charge at its reservation, or debits the overage the balance still covers', async () => {
    const account = await accounts.create({ name: 'overage', balanceMicros: 100_000 });
    const budget = budgets({ minLeaseMicros: 10_000, reservationsPerLease: 1 });
    const capped = await budget.reserve(account._id, 10_000, chatCall, 'hint');
    assert.equal(capped.charge(25_000, {}, { allowOverage: false }), 10_000);
    await settled(account._id);
    const over = await budget.reserve(account._id, 10_000, chatCall, 'hint');
    assert.equal(over.charge(25_000, {}, { allowOverage: true }), 25_000);
    const deadline = Date.now() + 5_000;
    while ((await accounts.find(account._id))!.spent_micros < 35_000) {
      assert.ok(Date.now() < deadline, 'the overage was never debited');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const after = await settled(account._id);
    assert.equal(after.balance_micros, 100_000 - 35_000);
    await budget.close();
  });

  it('debits an overage the balance cannot cover in full as far as the balance goes', async () => {
    const account = await accounts.create({ name: 'short overage', balanceMicros: 20_000 });
    const budget = budgets({ minLeaseMicros: 10_000, reservationsPerLease: 1 });
    const over = await budget.reserve(account._id, 10_000, chatCall, 'hint');
    // 15,000 beyond the hold, with 10,000 left in the balance.
    assert.equal(over.charge(25_000, {}, { allowOverage: true }), 25_000);
    await budget.close();
    const after = await settled(account._id);
    assert.equal(after.balance_micros, 0);
    assert.equal(after.spent_micros, 20_000);
    // The usage records say what was collected: per-key spend adds up to the ledger's.
    const records = await usageOf(account._id);
    assert.equal(records.reduce((sum, record) => sum + record.spend_micros, 0), 20_000, JSON.stringify(records));
  });

  it('settles the calls that ended on a lease while a long one still runs on it, which a new hold carries on', async () => {
    const account = await accounts.create({ name: 'long call', balanceMicros: 100_000 });
    const budget = budgets({ minLeaseMicros: 10_000, reservationsPerLease: 1, maxAgeMs: 100, idleMs: 60_000, smallLeaseIdleMs: 60_000 });
    const short = await budget.reserve(account._id, 4_000, chatCall, 'hint');
    // The long call leaves the lease nearly empty: a new one opens and this one is retired.
    const long = await budget.reserve(account._id, 5_000, chatCall, 'hint');
    short.charge(3_000, { inputTokens: 2, outputTokens: 2 }, { allowOverage: false });
    // Its settlement writes the ledger, then the usage record: wait for both.
    const usageSpent = async () => (await usageOf(account._id)).reduce((sum, record) => sum + record.spend_micros, 0);
    const deadline = Date.now() + 5_000;
    while ((await ledger.totals(account._id)).spent_micros < 3_000 || (await usageSpent()) < 3_000) {
      assert.ok(Date.now() < deadline, `the ended call stayed off the ledger or the usage records: ${JSON.stringify(await ledger.totals(account._id))}, usage ${await usageSpent()}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The ended call is on the ledger and in the usage records; the long one is still held.
    const meanwhile = await ledger.totals(account._id);
    assert.equal(meanwhile.spent_micros, 3_000);
    assert.ok(meanwhile.held_micros >= 5_000, JSON.stringify(meanwhile));
    assert.equal(await usageSpent(), 3_000);
    long.charge(4_000, { inputTokens: 2, outputTokens: 2 }, { allowOverage: false });
    await budget.close();
    const after = await settled(account._id);
    assert.deepEqual([after.balance_micros, after.held_micros, after.spent_micros], [93_000, 0, 7_000]);
    const records = await usageOf(account._id);
    assert.equal(records.reduce((sum, record) => sum + record.spend_micros, 0), 7_000, JSON.stringify(records));
    assert.equal(records.reduce((sum, record) => sum + record.requests, 0), 2);
  });

  it('serves a call that meets a renewal short of money, when trimming its own lease covers it', async () => {
    const account = await accounts.create({ name: 'renewal under way', balanceMicros: 12_000 });
    const budget = budgets({ minLeaseMicros: 10_000, reservationsPerLease: 1, idleMs: 60_000, smallLeaseIdleMs: 60_000 });
    // 8,000 of the 10,000 lease: a renewal starts, and finds 2,000 free, short of 8,000.
    const running = await budget.reserve(account._id, 8_000, chatCall, 'hint');
    // While it runs, a call of 3,000: the lease has 2,000 unreserved, the balance 2,000 free.
    const next = await budget.reserve(account._id, 3_000, chatCall, 'hint');
    next.charge(1_000, { inputTokens: 1, outputTokens: 1 }, { allowOverage: false });
    next.release();
    running.charge(8_000, { inputTokens: 1, outputTokens: 1 }, { allowOverage: false });
    running.release();
    await budget.close();
    const after = await settled(account._id);
    assert.deepEqual([after.balance_micros, after.held_micros, after.spent_micros], [3_000, 0, 9_000]);
  });

  it("debits an overage from the account's money this process had leased again meanwhile, not writing it off", async () => {
    const account = await accounts.create({ name: 'overage after renewal', balanceMicros: 20_000 });
    const budget = budgets({ minLeaseMicros: 10_000, reservationsPerLease: 1, idleMs: 60_000, smallLeaseIdleMs: 60_000 });
    // One call takes the whole first lease, so a second lease is opened in the background, and
    // it takes the rest of the free balance.
    const running = await budget.reserve(account._id, 10_000, chatCall, 'hint');
    const deadline = Date.now() + 5_000;
    while ((await ledger.totals(account._id)).held_micros < 20_000) {
      assert.ok(Date.now() < deadline, 'the second lease never opened');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal((await ledger.totals(account._id)).balance_micros, 0);
    // The running call ends 5,000 over its hold: the second lease's money pays it.
    assert.equal(running.charge(15_000, { inputTokens: 3, outputTokens: 3 }, { allowOverage: true }), 15_000);
    running.release();
    while ((await ledger.totals(account._id)).spent_micros < 15_000) {
      assert.ok(Date.now() < deadline + 5_000, `the overage was written off: ${JSON.stringify(await ledger.totals(account._id))}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await budget.close();
    const after = await settled(account._id);
    assert.deepEqual([after.balance_micros, after.held_micros, after.spent_micros], [5_000, 0, 15_000]);
    const records = await usageOf(account._id);
    assert.equal(records.reduce((sum, record) => sum + record.spend_micros, 0), 15_000, JSON.stringify(records));
  });

  it('lets two API processes share one account without spending more than it has', async () => {
    const account = await accounts.create({ name: 'shared', balanceMicros: 100_000 });
    const processes = [budgets({ minLeaseMicros: 20_000 }), budgets({ minLeaseMicros: 20_000 })];
    let granted = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 40 }, async (_unused, index) => {
        try {
          const reservation = await processes[index % 2]!.reserve(account._id, 5_000, chatCall, 'hint');
          granted++;
          reservation.charge(5_000, { outputTokens: 1 }, { allowOverage: false });
        } catch (error) {
          assert.ok(error instanceof GatewayError && error.code === 'insufficient_balance', String(error));
          refused++;
        }
      }),
    );
    await Promise.all(processes.map((process) => process.close()));
    const after = await settled(account._id);
    assert.equal(granted + refused, 40);
    assert.ok(granted <= 20, `granted ${granted} calls of $0.005 from $0.10`);
    assert.ok(granted >= 1);
    assert.equal(after.spent_micros, granted * 5_000);
    assert.equal(after.balance_micros, 100_000 - granted * 5_000);
    const records = await usageOf(account._id);
    assert.equal(records.reduce((sum, record) => sum + record.requests, 0), granted);
  });

  it('replaces old leases under steady load and loses no call between them', async () => {
    const account = await accounts.create({ name: 'steady', balanceMicros: 10_000_000 });
    const budget = budgets({ maxAgeMs: 100, minLeaseMicros: 200_000 });
    let charged = 0;
    const until = Date.now() + 800;
    const workers = Array.from({ length: 4 }, async () => {
      while (Date.now() < until) {
        const reservation: Reservation = await budget.reserve(account._id, 20_000, chatCall, 'hint');
        await new Promise((resolve) => setTimeout(resolve, 5));
        charged += reservation.charge(7_000, { outputTokens: 3 }, { allowOverage: false });
      }
    });
    await Promise.all(workers);
    await budget.close();
    const after = await settled(account._id);
    const holds = await ledger.entries.countDocuments({ account_id: account._id, operation: 'hold' });
    assert.ok(holds >= 3, `only ${holds} leases in 0.8 s with a 0.1 s maximum age`);
    assert.equal(after.spent_micros, charged);
    assert.equal(after.balance_micros, 10_000_000 - charged);
    const records = await usageOf(account._id);
    assert.equal(records.reduce((sum, record) => sum + record.spend_micros, 0), charged);
  });

  it("keeps an account's lease through pauses shorter than the idle time, and gives it back after", async () => {
    const account = await accounts.create({ name: 'pausing', balanceMicros: 1_000_000 });
    const holds = () => ledger.entries.countDocuments({ account_id: account._id, operation: 'hold' });
    const budget = budgets({ idleMs: 1_500 });
    for (let call = 0; call < 3; call++) {
      if (call > 0) await new Promise((resolve) => setTimeout(resolve, 300));
      (await budget.reserve(account._id, 10_000, chatCall, 'hint')).charge(2_000, { outputTokens: 1 }, { allowOverage: false });
    }
    assert.equal(await holds(), 1, 'three calls 0.3 s apart, one lease: none of them waited for a hold');

    // Given back by the idle time alone (close() would settle it too, so it comes after).
    const after = await settled(account._id);
    assert.equal(after.spent_micros, 6_000);
    assert.equal(after.balance_micros, 1_000_000 - 6_000);
    // The ledger is settled before the lease document goes: close() waits for that last step.
    await budget.close();
    assert.equal(await leases.collection.countDocuments({ account_id: account._id }), 0);
  });

  it('keeps a lease that is a small share of the balance through long pauses, renewing it only after calls', async () => {
    // $1 leases of a $20 balance: small ones (a tenth or less). A $2 balance: its $1 lease is half.
    const rich = await accounts.create({ name: 'rich', balanceMicros: 20_000_000 });
    const poor = await accounts.create({ name: 'poor', balanceMicros: 2_000_000 });
    const holds = (accountId: string) => ledger.entries.countDocuments({ account_id: accountId, operation: 'hold' });
    const budget = budgets({ idleMs: 200, smallLeaseIdleMs: 60_000, maxAgeMs: 300 });
    (await budget.reserve(rich._id, 10_000, chatCall, 'hint')).charge(2_000, { outputTokens: 1 }, { allowOverage: false });
    (await budget.reserve(poor._id, 10_000, chatCall, 'hint')).charge(2_000, { outputTokens: 1 }, { allowOverage: false });

    // Past the idle time and the maximum age: the poor account's lease went back; the rich
    // one's was renewed once (its call must reach the ledger), and the new lease, unused, stays.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    assert.equal((await accounts.find(poor._id))!.held_micros, 0);
    assert.equal((await accounts.find(poor._id))!.spent_micros, 2_000);
    const richNow = (await accounts.find(rich._id))!;
    assert.equal(richNow.spent_micros, 2_000, 'the call is on the ledger within a lease age');
    assert.equal(richNow.held_micros, 1_000_000, 'one small lease still held');
    assert.equal(await holds(rich._id), 2);

    // A call after the long pause reserves at once from the kept lease: no new hold in line.
    (await budget.reserve(rich._id, 10_000, chatCall, 'hint')).charge(3_000, { outputTokens: 1 }, { allowOverage: false });
    assert.equal(await holds(rich._id), 2);

    await budget.close();
    const after = await settled(rich._id);
    assert.equal(after.spent_micros, 5_000);
    assert.equal(after.balance_micros, 20_000_000 - 5_000);
  });

  it('gives unspent leased money back when asked, so a direct hold can use it', async () => {
    const account = await accounts.create({ name: 'video', balanceMicros: 1_000_000 });
    const budget = budgets({ idleMs: 60_000 });
    (await budget.reserve(account._id, 10_000, chatCall, 'hint')).charge(3_000, {}, { allowOverage: false });
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_x', operation: 'hold', amountMicros: 900_000 }), 'insufficient_balance');
    await budget.returnUnused(account._id, 900_000);
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_x', operation: 'hold', amountMicros: 900_000 }), 'applied');
    assert.equal((await accounts.find(account._id))!.spent_micros, 3_000);
    await budget.close();
  });

  it('releases the lease of a process that died, once it expires, and no earlier', async () => {
    const account = await accounts.create({ name: 'crash', balanceMicros: 1_000_000 });
    // A process whose timer never fires again and that is never closed: a crash.
    const dead = budgets({ tickMs: 1_000_000_000, expiryMs: 60_000 });
    (await dead.reserve(account._id, 10_000, chatCall, 'hint')).charge(4_000, {}, { allowOverage: false });
    assert.equal((await accounts.find(account._id))!.held_micros, 1_000_000);

    assert.equal(await sweepExpiredLeases({ ledger, leases }), 0, 'a live lease is left alone');
    // The sweeper reads the time on the store's clock, as the lease's process wrote the expiry:
    // a store clock 61 s ahead of this machine's finds the lease expired.
    const storeAhead = { command: async (command: object) => ({ ...(await database.db.command(command)), localTime: new Date(Date.now() + 61_000) }) };
    // (Leases earlier tests left open in this store expire at that time too: this one is among them.)
    assert.ok((await sweepExpiredLeases({ ledger, leases: new BudgetLeaseStore(database.db, new StoreClock(storeAhead as never)) })) >= 1);
    const after = (await accounts.find(account._id))!;
    assert.equal(after.held_micros, 0);
    // Its timer never fired, so its calls never reached its journal: they are lost with it, and
    // nobody is ever charged twice.
    assert.equal(after.balance_micros, 1_000_000);
    assert.equal(await leases.collection.countDocuments({ account_id: account._id }), 0);
    assert.equal(await sweepExpiredLeases({ ledger, leases }, new Date(Date.now() + 61_000)), 0);
  });

  it('charges the calls a killed process had written to its lease journal when its lease expires, with their usage', async () => {
    const account = await accounts.create({ name: 'killed', balanceMicros: 1_000_000 });
    // A process on a connection of its own, cut once its journal has the calls: it can neither
    // settle nor extend from then on, as if killed. Its lease lives 60 s.
    const own = await connectDatabase(process.env.FRAMEGATE_TEST_MONGODB_URI!, database.db.databaseName);
    const killed = new AccountBudgets({
      ledger: new Ledger(own.db),
      leases: new BudgetLeaseStore(own.db),
      usage: new UsageStore(own.db),
      log: silent,
      timing: { idleMs: 60_000, smallLeaseIdleMs: 60_000, tickMs: 20, journalMs: 50, expiryMs: 60_000 },
    });
    for (const price of [4_000, 2_500]) (await killed.reserve(account._id, 10_000, chatCall, 'hint')).charge(price, { inputTokens: 7, outputTokens: 3 }, { allowOverage: false });
    const started = Date.now();
    while ((await leases.journal.collection.findOne({ account_id: account._id }))?.spent_micros !== 6_500) {
      assert.ok(Date.now() - started < 3_000, 'the journal never had both calls');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // A third call after the last write: it is lost with the process.
    (await killed.reserve(account._id, 10_000, chatCall, 'hint')).charge(1_000, { inputTokens: 1, outputTokens: 1 }, { allowOverage: false });
    await own.close();

    const storeAhead = { command: async (command: object) => ({ ...(await database.db.command(command)), localTime: new Date(Date.now() + 61_000) }) };
    // (Leases earlier tests left open in this store expire at that time too: this one is among them.)
    assert.ok((await sweepExpiredLeases({ ledger, leases: new BudgetLeaseStore(database.db, new StoreClock(storeAhead as never)) })) >= 1);
    const after = (await accounts.find(account._id))!;
    assert.deepEqual([after.held_micros, after.spent_micros, after.balance_micros], [0, 6_500, 993_500]);
    const records = await usageOf(account._id);
    assert.deepEqual(records.map((record) => [record.requests, record.input_tokens, record.output_tokens, record.spend_micros]), [[2, 14, 6, 6_500]]);
    assert.equal(await leases.journal.collection.countDocuments({ account_id: account._id }), 0, 'the journal goes with its lease');
  });

  it('charges what its settlement wrote to the journal when its process dies between that and its capture', async () => {
    const account = await accounts.create({ name: 'killed-mid-settlement', balanceMicros: 1_000_000 });
    // The process's capture never comes (it was killed right after its journal) until the test
    // lets it, once the lease was released as expired.
    const killedBeforeCapture = new LedgerHeldBack(database.db, 'capture');
    // The journal is written at the first tick after the first charge, then not for a minute.
    const dying = new AccountBudgets({ ledger: killedBeforeCapture, leases, usage, log: silent, timing: { idleMs: 300, smallLeaseIdleMs: 300, tickMs: 20, journalMs: 60_000, expiryMs: 60_000 } });
    (await dying.reserve(account._id, 10_000, chatCall, 'hint')).charge(4_000, { inputTokens: 7, outputTokens: 3 }, { allowOverage: false });
    await waitUntil(async () => (await leases.journal.collection.findOne({ account_id: account._id }))?.spent_micros === 4_000);
    (await dying.reserve(account._id, 10_000, chatCall, 'hint')).charge(2_500, { inputTokens: 7, outputTokens: 3 }, { allowOverage: false });
    // Idle, the lease settles: its journal is written whole, then the capture never comes.
    await killedBeforeCapture.reached;
    assert.equal((await leases.journal.collection.findOne({ account_id: account._id }))?.spent_micros, 6_500);

    const storeAhead = { command: async (command: object) => ({ ...(await database.db.command(command)), localTime: new Date(Date.now() + 61_000) }) };
    // (Leases earlier tests left open in this store expire at that time too: this one is among them.)
    assert.ok((await sweepExpiredLeases({ ledger, leases: new BudgetLeaseStore(database.db, new StoreClock(storeAhead as never)) })) >= 1);
    const after = (await accounts.find(account._id))!;
    // The journal had the whole statement before the capture: 4,000 from a journal a tick old
    // was captured beside records of 6,500 before.
    assert.deepEqual([after.held_micros, after.spent_micros, after.balance_micros], [0, 6_500, 993_500]);
    assert.deepEqual((await usageOf(account._id)).map((record) => [record.requests, record.spend_micros]), [[2, 6_500]]);
    killedBeforeCapture.openGate();
    await dying.close();
    assert.equal((await accounts.find(account._id))!.spent_micros, 6_500, 'charged once when its settlement went on after all');
  });

  it('charges a lease once when its process settles it after it was settled from its journal as expired', async () => {
    const account = await accounts.create({ name: 'late', balanceMicros: 1_000_000 });
    // The journal is written at the first tick after the first charge, then not for a minute:
    // the second charge is surely missing from it when the lease is released as expired.
    const budget = budgets({ idleMs: 60_000, smallLeaseIdleMs: 60_000, journalMs: 60_000, expiryMs: 60_000 });
    (await budget.reserve(account._id, 10_000, chatCall, 'hint')).charge(4_000, { inputTokens: 5, outputTokens: 5 }, { allowOverage: false });
    const started = Date.now();
    while (!(await leases.journal.collection.findOne({ account_id: account._id }))) {
      assert.ok(Date.now() - started < 3_000, 'the journal was never written');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    (await budget.reserve(account._id, 10_000, chatCall, 'hint')).charge(3_000, { inputTokens: 5, outputTokens: 5 }, { allowOverage: false });
    // Another process's clock says the lease expired: it is settled from the journal (4,000),
    // then its own process settles all of it (7,000) and owes only the difference.
    const storeAhead = { command: async (command: object) => ({ ...(await database.db.command(command)), localTime: new Date(Date.now() + 61_000) }) };
    // (Leases earlier tests left open in this store expire at that time too: this one is among them.)
    assert.ok((await sweepExpiredLeases({ ledger, leases: new BudgetLeaseStore(database.db, new StoreClock(storeAhead as never)) })) >= 1);
    assert.equal((await accounts.find(account._id))!.spent_micros, 4_000);
    await budget.close();
    const after = await settled(account._id);
    assert.deepEqual([after.held_micros, after.spent_micros + after.balance_micros], [0, 1_000_000]);
    assert.equal(1_000_000 - after.balance_micros, 7_000, 'both calls charged once');
    const records = await usageOf(account._id);
    assert.deepEqual(records.map((record) => [record.requests, record.spend_micros]), [[2, 7_000]], 'the usage records have both calls');
  });

  it('closes within its time limit when the store has gone, leaving the hold to the sweeper', async () => {
    const account = await accounts.create({ name: 'gone', balanceMicros: 5_000_000 });
    // A connection of its own, closed under the budgets: every settling attempt then fails at
    // once and is retried with backoff (about 6 s in all), which close() must not wait out.
    const own = await connectDatabase(process.env.FRAMEGATE_TEST_MONGODB_URI!, database.db.databaseName);
    const errors: string[] = [];
    const budget = new AccountBudgets({
      ledger: new Ledger(own.db),
      leases: new BudgetLeaseStore(own.db),
      usage: new UsageStore(own.db),
      log: { warn() {}, error: (_details: unknown, message?: string) => void errors.push(String(message)) },
      timing: { idleMs: 50, smallLeaseIdleMs: 50, tickMs: 20 },
    });
    const reservation = await budget.reserve(account._id, 2_000, chatCall, 'hint');
    reservation.charge(1_500, { inputTokens: 10, outputTokens: 1 }, { allowOverage: false });
    await own.close();

    const started = Date.now();
    await budget.close(500);
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 1_500, `close() took ${elapsed} ms`);
    assert.ok(errors.some((message) => /lease unsettled/.test(message)), `logged: ${errors.join(' | ')}`);
    assert.ok((await accounts.find(account._id))!.held_micros > 0, 'the hold stays for the sweeper');
  });
});
