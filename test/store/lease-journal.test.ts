import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountStore } from '../../store/accounts.ts';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { releaseExpiredLease } from '../../store/expired-leases.ts';
import { UsageStore } from '../../store/usage.ts';
import { sweepExpiredLeases } from '../../worker/lease-sweeper.ts';
import { Ledger } from '../../store/ledger.ts';
import { testDatabase } from '../helpers/engines.ts';

// A journal outlives its lease only when its process settled the lease and died before it
// removed the journal; the sweeper removes such journals once they are old, and only those.

describe('spend lease journals', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('lease-journal');
  });
  after(() => database.drop());

  it('removes old journals whose lease is gone, and keeps those of open leases and recent ones', async () => {
    const leases = new BudgetLeaseStore(database.db);
    const old = new Date(Date.now() - 11 * 60_000);
    await leases.open({ _id: 'lease_open', account_id: 'acct_j', amount_micros: 1_000, opened_at: old, expires_at: new Date(Date.now() + 30_000) });
    await leases.journal.collection.insertMany([
      { _id: 'lease_open', account_id: 'acct_j', spent_micros: 5, usage: [], written_at: old },
      { _id: 'lease_settled', account_id: 'acct_j', spent_micros: 5, usage: [], written_at: old },
      { _id: 'lease_settling', account_id: 'acct_j', spent_micros: 5, usage: [], written_at: new Date() },
    ]);
    await sweepExpiredLeases({ ledger: new Ledger(database.db), leases });
    const left = (await leases.journal.collection.find().toArray()).map((entry) => entry._id).sort();
    assert.deepEqual(left, ['lease_open', 'lease_settling']);
  });

  it('records the usage of a journal beyond its hold at what its capture collected', async () => {
    const ledger = new Ledger(database.db);
    const leases = new BudgetLeaseStore(database.db);
    const account = await new AccountStore(database.db).create({ name: 'journal overage', balanceMicros: 10_000 });
    const reference = 'lease_over';
    await leases.open({ _id: reference, account_id: account._id, amount_micros: 10_000, opened_at: new Date(), expires_at: new Date(Date.now() - 1_000) });
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference, operation: 'hold', amountMicros: 10_000 }), 'applied');
    // Its process died with calls 15,000 into a 10,000 hold (an upstream's overage): the free
    // balance is 0, so 10,000 is all that can be collected.
    const at = new Date();
    await leases.journal.collection.insertOne({
      _id: reference,
      account_id: account._id,
      spent_micros: 15_000,
      usage: [
        { _id: `${reference}:key_a:m:chat`, account_id: account._id, key_id: 'key_a', model: 'm', kind: 'chat', requests: 2, video_seconds: 0, input_tokens: 9, output_tokens: 9, images: 0, spend_micros: 12_000, at },
        { _id: `${reference}:key_b:m:chat`, account_id: account._id, key_id: 'key_b', model: 'm', kind: 'chat', requests: 1, video_seconds: 0, input_tokens: 3, output_tokens: 3, images: 0, spend_micros: 3_000, at },
      ],
      written_at: at,
    });
    assert.equal(await releaseExpiredLease({ ledger, leases }, { _id: reference, account_id: account._id }), 'applied');
    assert.equal((await ledger.totals(account._id)).spent_micros, 10_000);
    const records = await new UsageStore(database.db).collection.find({ account_id: account._id }).sort({ key_id: 1 }).toArray();
    // What went uncollected comes off the largest record first.
    assert.deepEqual(records.map((record) => [record.key_id, record.requests, record.spend_micros]), [['key_a', 2, 7_000], ['key_b', 1, 3_000]]);
  });
});
