import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountStore } from '../../store/accounts.ts';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { Ledger } from '../../store/ledger.ts';
import { sweepExpiredLeases } from '../../worker/lease-sweeper.ts';
import { testDatabase } from '../helpers/engines.ts';

// A process writes its lease's document before the lease's hold, and the hold can land after
// the lease's expiry (it waits behind the account's other movements, or a stalled store). The
// sweeper must not drop the document of a lease whose hold may still come: nobody could then
// find that hold, and it would stay held for good once its process died.

describe('the sweeper and a lease expired before its hold landed', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let accounts: AccountStore;
  let ledger: Ledger;
  let leases: BudgetLeaseStore;
  before(async () => {
    database = await testDatabase('expired_leases');
    accounts = new AccountStore(database.db);
    ledger = new Ledger(database.db);
    leases = new BudgetLeaseStore(database.db);
  });
  after(() => database.drop());

  const expireNow = (reference: string) => leases.collection.updateOne({ _id: reference }, { $set: { expires_at: new Date(Date.now() - 1_000) } });

  it('leaves the document for a late hold, then releases that hold once the lease expires again', async () => {
    const account = await accounts.create({ name: 'late hold', balanceMicros: 10_000 });
    const reference = 'lease_late_hold';
    await leases.open({ _id: reference, account_id: account._id, amount_micros: 4_000, opened_at: new Date(Date.now() - 31_000), expires_at: new Date(Date.now() - 1_000) });

    assert.equal(await sweepExpiredLeases({ ledger, leases }), 1);
    const waiting = await leases.collection.findOne({ _id: reference });
    assert.ok(waiting, 'the document is still there for the hold to be found by');
    assert.equal(waiting.hold_awaited, true);
    assert.ok(waiting.expires_at.getTime() > Date.now() + 9 * 60_000, `left until ${waiting.expires_at.toISOString()}`);

    // The hold lands, and its process dies before settling it.
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference, operation: 'hold', amountMicros: 4_000 }), 'applied');
    assert.equal((await ledger.totals(account._id)).held_micros, 4_000);
    await expireNow(reference);
    assert.equal(await sweepExpiredLeases({ ledger, leases }), 1);

    assert.equal(await leases.collection.findOne({ _id: reference }), null);
    assert.deepEqual(await ledger.totals(account._id), { balance_micros: 10_000, held_micros: 0, spent_micros: 0 });
  });

  it('removes a document whose hold never came, once its second expiry is past', async () => {
    const account = await accounts.create({ name: 'no hold', balanceMicros: 10_000 });
    const reference = 'lease_never_held';
    await leases.open({ _id: reference, account_id: account._id, amount_micros: 4_000, opened_at: new Date(Date.now() - 31_000), expires_at: new Date(Date.now() - 1_000) });
    await sweepExpiredLeases({ ledger, leases });
    await expireNow(reference);
    await sweepExpiredLeases({ ledger, leases });
    assert.equal(await leases.collection.findOne({ _id: reference }), null);
    assert.deepEqual(await ledger.totals(account._id), { balance_micros: 10_000, held_micros: 0, spent_micros: 0 });
  });
});
