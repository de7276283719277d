import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
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
});
