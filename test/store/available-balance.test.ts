import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountStore } from '../../store/accounts.ts';
import { availableBalance } from '../../store/available-balance.ts';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { Ledger } from '../../store/ledger.ts';
import { testDatabase } from '../helpers/engines.ts';

// What an account can spend now, from its ledger and its open spend leases: each lease's hold,
// less its trim and what its journal says it spent; nothing for a settled lease or a carrier;
// an overspent lease owes its overage; a video task's hold is no lease. And every ledger entry
// judged against the totals' snapshot, so a lease opened after them is not counted twice.

describe('available balance', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let ledger: Ledger;
  let leases: BudgetLeaseStore;
  let accounts: AccountStore;
  before(async () => {
    database = await testDatabase('available-balance');
    ledger = new Ledger(database.db);
    leases = new BudgetLeaseStore(database.db);
    accounts = new AccountStore(database.db);
  });
  after(() => database.drop());

  async function openLease(accountId: string, reference: string, holdMicros: number, fields: { spentMicros?: number; carriesCalls?: true } = {}) {
    assert.equal(await ledger.apply({ accountId, keyId: null, reference, operation: 'hold', amountMicros: holdMicros }), 'applied');
    const now = Date.now();
    await leases.open({ _id: reference, account_id: accountId, amount_micros: holdMicros, opened_at: new Date(now), expires_at: new Date(now + 60_000), ...(fields.carriesCalls ? { carries_calls: true } : {}) });
    if (fields.spentMicros !== undefined) await leases.journal.write([{ _id: reference, account_id: accountId, spent_micros: fields.spentMicros, usage: [] }]);
  }

  it('counts each open lease\'s unspent hold, and nothing else held', async () => {
    const account = await accounts.create({ name: 'leases', balanceMicros: 1_000_000 });
    const id = account._id;
    await openLease(id, `${id}:plain`, 300_000, { spentMicros: 50_000 }); // 250,000 unspent
    await openLease(id, `${id}:trimmed`, 200_000, { spentMicros: 30_000 });
    assert.equal(await ledger.apply({ accountId: id, keyId: null, reference: `${id}:trimmed`, operation: 'trim', amountMicros: 100_000 }), 'applied'); // 70,000
    await openLease(id, `${id}:settled`, 100_000, { spentMicros: 40_000 });
    assert.equal(await ledger.apply({ accountId: id, keyId: null, reference: `${id}:settled`, operation: 'capture', amountMicros: 40_000, heldMicros: 100_000 }), 'applied'); // its document not removed yet: 0
    await openLease(id, `${id}:carrier`, 50_000, { carriesCalls: true }); // reserved whole: 0
    await openLease(id, `${id}:overspent`, 20_000, { spentMicros: 25_000 }); // owes 5,000
    await openLease(id, `${id}:fresh`, 10_000); // no journal yet: 10,000
    assert.equal(await ledger.apply({ accountId: id, keyId: 'key_x', reference: `task_${id}`, operation: 'hold', amountMicros: 100_000 }), 'applied'); // a video task's hold

    const figures = await availableBalance({ ledger, leases }, id);
    const totals = await ledger.totals(id);
    assert.deepEqual({ ...figures, available_micros: undefined }, { ...totals, available_micros: undefined }, 'the totals come with it');
    assert.equal(figures.available_micros, totals.balance_micros + 250_000 + 70_000 + 0 + 0 - 5_000 + 10_000);
    assert.equal(totals.balance_micros, 1_000_000 - 300_000 - 100_000 - 40_000 - 50_000 - 20_000 - 10_000 - 100_000);
  });

  it('takes each lease as it stood when the totals were read', async () => {
    const account = await accounts.create({ name: 'race', balanceMicros: 1_000_000 });
    const id = account._id;
    await openLease(id, `${id}:before`, 300_000, { spentMicros: 100_000 });
    const earlier = await ledger.snapshot(id);
    // Between the totals and the leases: one lease opens, the other is trimmed. Counted as of
    // the totals, the new lease would be counted twice (its money is still in the balance read).
    await openLease(id, `${id}:after`, 200_000);
    assert.equal(await ledger.apply({ accountId: id, keyId: null, reference: `${id}:before`, operation: 'trim', amountMicros: 100_000 }), 'applied');
    const asOfEarlier = Object.assign(Object.create(ledger) as Ledger, { snapshot: async () => earlier });
    const figures = await availableBalance({ ledger: asOfEarlier, leases }, id);
    assert.equal(figures.balance_micros, 700_000);
    assert.equal(figures.available_micros, 700_000 + 200_000, 'the first lease untrimmed, the second not yet held');
    // Read now, both count as they stand.
    const now = await availableBalance({ ledger, leases }, id);
    assert.equal(now.available_micros, now.balance_micros + 100_000 + 200_000);
    assert.equal(now.available_micros, 900_000);
  });

  it('is the balance for an account without leases, and never below nothing', async () => {
    const quiet = await accounts.create({ name: 'quiet', balanceMicros: 5_000 });
    assert.equal((await accounts.withAvailable(quiet)).available_micros, 5_000);
    const broke = await accounts.create({ name: 'broke', balanceMicros: 10_000 });
    await openLease(broke._id, `${broke._id}:over`, 10_000, { spentMicros: 30_000 });
    assert.equal((await availableBalance({ ledger, leases }, broke._id)).available_micros, 0);
  });
});
