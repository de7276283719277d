import type { Collection, Db } from 'mongodb';

// The open spend leases of every API process (api/services/billing/): one document per lease,
// written before its ledger hold and deleted once the lease is settled. A process that dies
// with a lease open leaves the document behind; once it is past `expires_at` the worker's
// sweeper releases the hold. Live processes push `expires_at` forward while a lease stays open
// (a long stream keeps its lease open), so the sweeper only ever sees the leases of the dead.
//
// The collection stays as small as the number of open leases, so the sweeper's range query
// (a scan on FerretDB) is cheap; every other access is by _id.

export interface BudgetLeaseDocument {
  /** The lease's ledger reference. */
  _id: string;
  account_id: string;
  amount_micros: number;
  opened_at: Date;
  expires_at: Date;
}

export class BudgetLeaseStore {
  readonly collection: Collection<BudgetLeaseDocument>;

  constructor(db: Db) {
    this.collection = db.collection<BudgetLeaseDocument>('budget_leases');
  }

  async open(lease: BudgetLeaseDocument): Promise<void> {
    await this.collection.insertOne(lease);
  }

  async extend(reference: string, expiresAt: Date): Promise<void> {
    await this.collection.updateOne({ _id: reference }, { $set: { expires_at: expiresAt } });
  }

  async remove(reference: string): Promise<void> {
    await this.collection.deleteOne({ _id: reference });
  }

  expiredBefore(now: Date, limit: number): Promise<BudgetLeaseDocument[]> {
    return this.collection.find({ expires_at: { $lt: now } }).sort({ expires_at: 1 }).limit(limit).toArray();
  }
}
