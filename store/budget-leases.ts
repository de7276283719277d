import type { Collection, Db } from 'mongodb';
import { LeaseJournal } from './lease-journal.ts';
import { StoreClock } from './store-clock.ts';

// The open spend leases of every API process (api/services/billing/): one document per lease,
// written before its ledger hold and deleted once the lease is settled. A process that dies
// with a lease open leaves the document behind; once it is past `expires_at` its hold is
// released (store/expired-leases.ts) by the worker's sweeper, or sooner by a caller of the
// account that needs the money. Live processes push `expires_at` forward while a lease stays open
// (a long stream keeps its lease open), so the sweeper only ever sees the leases of the dead.
//
// The collection stays as small as the number of open leases, so the sweeper's range query and
// the account query of a process asking leases back (no index: they read every lease) are
// cheap; every other access is by _id.
//
// `expires_at` is on the store's clock (store-clock.ts), so processes whose clocks disagree
// still agree on which leases are past it.

export interface BudgetLeaseDocument {
  /** The lease's ledger reference. */
  _id: string;
  account_id: string;
  amount_micros: number;
  opened_at: Date;
  expires_at: Date;
  /** Set by another process that needs the money: the owner gives the lease back
   * (api/services/billing/lease-recall.ts). */
  recalled_at?: Date;
  /** The `recalled_at` its owner answered: it gave back what it could then (the lease may stay
   * open while calls run on it, with nothing left to give). The mark stays, so the owner trims
   * the rest as soon as a call ends. */
  recall_answered_at?: Date;
  /** A carrier: its whole hold is reserved by calls moved onto it that still run
   * (api/services/billing/lease-carriers.ts), so asking it back would get nothing. */
  carries_calls?: true;
  /** Set when it was found expired with no hold yet (store/expired-leases.ts): its expiry was
   * moved on once, for a hold still on its way. */
  hold_awaited?: true;
}

export class BudgetLeaseStore {
  readonly collection: Collection<BudgetLeaseDocument>;
  /** What each lease's calls cost so far (lease-journal.ts). */
  readonly journal: LeaseJournal;

  constructor(
    db: Db,
    /** The clock `expires_at` is written and judged on. */
    readonly clock = new StoreClock(db),
  ) {
    this.collection = db.collection<BudgetLeaseDocument>('budget_leases');
    this.journal = new LeaseJournal(db);
  }

  async open(lease: BudgetLeaseDocument): Promise<void> {
    await this.collection.insertOne(lease);
  }

  /** Pushes a lease's expiry to `expiresAt`, unless it is gone or already past its expiry at
   * `now` (both on the store's clock): whoever releases expired leases may then be releasing it,
   * so it must not be spent from again. False in that case. */
  async extend(reference: string, expiresAt: Date, now: Date): Promise<boolean> {
    const result = await this.collection.updateOne({ _id: reference, expires_at: { $gt: now } }, { $set: { expires_at: expiresAt } });
    return result.matchedCount === 1;
  }

  /** Leaves a lease found with no hold for `until`, marked: a hold still on its way then has a
   * document to be found by. */
  async awaitHold(reference: string, until: Date): Promise<void> {
    await this.collection.updateOne({ _id: reference }, { $set: { expires_at: until, hold_awaited: true } });
  }

  async remove(reference: string): Promise<void> {
    await this.collection.deleteOne({ _id: reference });
  }

  /** The open leases of `accountId`, with whether each carries calls. */
  ofAccount(accountId: string): Promise<Pick<BudgetLeaseDocument, '_id' | 'carries_calls'>[]> {
    return this.collection.find({ account_id: accountId }, { projection: { _id: 1, carries_calls: 1 } }).toArray();
  }

  /** The open leases of `accountId` other than `own` (another process's, or a dead one's). */
  othersOf(accountId: string, own: string[]): Promise<Omit<BudgetLeaseDocument, 'opened_at'>[]> {
    return this.collection.find({ account_id: accountId, _id: { $nin: own } }, { projection: { opened_at: 0 } }).toArray();
  }

  async recall(references: string[], at: Date): Promise<void> {
    await this.collection.updateMany({ _id: { $in: references } }, { $set: { recalled_at: at } });
  }

  /** The owner has given back what it could of a lease asked for at `recalledAt`; a later ask
   * stays unanswered. */
  async answerRecall(reference: string, recalledAt: Date): Promise<void> {
    await this.collection.updateOne({ _id: reference, recalled_at: recalledAt }, { $set: { recall_answered_at: recalledAt } });
  }

  /** Those of `references` another process has recalled. */
  recalledAmong(references: string[]): Promise<Pick<BudgetLeaseDocument, '_id' | 'recalled_at' | 'recall_answered_at'>[]> {
    return this.collection.find({ _id: { $in: references }, recalled_at: { $exists: true } }, { projection: { _id: 1, recalled_at: 1, recall_answered_at: 1 } }).toArray();
  }

  /** Those of `references` still open. */
  openAmong(references: string[]): Promise<Pick<BudgetLeaseDocument, '_id' | 'amount_micros' | 'expires_at' | 'recalled_at' | 'recall_answered_at'>[]> {
    return this.collection.find({ _id: { $in: references } }, { projection: { _id: 1, amount_micros: 1, expires_at: 1, recalled_at: 1, recall_answered_at: 1 } }).toArray();
  }

  expiredBefore(now: Date, limit: number): Promise<BudgetLeaseDocument[]> {
    return this.collection.find({ expires_at: { $lt: now } }).sort({ expires_at: 1 }).limit(limit).toArray();
  }
}
