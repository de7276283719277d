import type { Collection, Db } from 'mongodb';
import { UsageStore, withShortfall, type UsageRecord } from './usage.ts';

// What a spend lease's calls have cost so far, as its api process last wrote it down: one
// document per lease in `lease_journal`, rewritten whole (the lease's running totals) about once
// a second while its calls are charged (api/services/billing/account-budgets.ts). Only the
// lease's own process writes it, one write at a time, so a later total never loses to an
// earlier one.
//
// A lease settles with the ledger a few seconds after it opens. A process killed before that
// used to take what its lease's calls cost with it: the hold was released as expired and the
// calls went unbilled. Whoever releases an expired lease now charges what its journal says
// (store/expired-leases.ts), so a kill loses at most the calls since the last write.

export type JournalUsage = Omit<UsageRecord, 'day' | 'created_at'> & { at: Date };

export interface LeaseJournalDocument {
  /** The lease's ledger reference. */
  _id: string;
  account_id: string;
  /** Everything its calls cost so far (may pass the hold: overage). */
  spent_micros: number;
  /** Its usage records so far, under the ids its own settlement would write. */
  usage: JournalUsage[];
  written_at: Date;
}

export class LeaseJournal {
  readonly collection: Collection<LeaseJournalDocument>;
  private readonly usage: UsageStore;

  constructor(db: Db) {
    this.collection = db.collection<LeaseJournalDocument>('lease_journal');
    this.usage = new UsageStore(db);
  }

  /** Writes leases' totals so far over the ones written before, in one round trip. */
  async write(entries: ReadonlyArray<Omit<LeaseJournalDocument, 'written_at'>>): Promise<void> {
    if (entries.length === 0) return;
    const writtenAt = new Date();
    await this.collection.bulkWrite(
      entries.map(({ _id, ...fields }) => ({ updateOne: { filter: { _id }, update: { $set: { ...fields, written_at: writtenAt } }, upsert: true } })),
      { ordered: false },
    );
  }

  read(reference: string): Promise<LeaseJournalDocument | null> {
    return this.collection.findOne({ _id: reference });
  }

  /** The journal's usage as usage records, written over any under the same ids, less what of
   * their spend the ledger did not collect: `collectedMicros` is what it took for the lease (its
   * capture and any debit), which falls short of the journal beyond the lease's hold. */
  async recordUsage(entry: LeaseJournalDocument, collectedMicros: number): Promise<void> {
    await this.usage.replaceMany(withShortfall(entry.usage, entry.spent_micros - collectedMicros));
  }

  async remove(reference: string): Promise<void> {
    await this.collection.deleteOne({ _id: reference });
  }

  /** Removes journals whose lease is no longer open and that were last written before
   * `before`: a process that settled its lease and died before it removed the journal. Looks at
   * up to `limit` old journals a call, which may include as many of open idle leases (ids only:
   * a few tens of KB). */
  async removeOrphans(openReferences: (references: string[]) => Promise<string[]>, before: Date, limit: number): Promise<number> {
    const old = await this.collection.find({ written_at: { $lt: before } }, { projection: { _id: 1 } }).limit(limit).toArray();
    if (old.length === 0) return 0;
    const open = new Set(await openReferences(old.map((entry) => entry._id)));
    const orphans = old.map((entry) => entry._id).filter((reference) => !open.has(reference));
    if (orphans.length > 0) await this.collection.deleteMany({ _id: { $in: orphans } });
    return orphans.length;
  }
}
