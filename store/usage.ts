import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// Usage records under deterministic ids, so a retried writer cannot count twice: one per video
// task, and one per (spend lease, key, model, kind) for chat and images, which sums the calls
// that lease paid for (`requests` may be more than 1: always sum fields, never count records).
// `day` is precomputed (UTC) because FerretDB's aggregation has no date operators, so per-key
// reports can be a $match on key and day range plus a $group.

export interface UsageRecord {
  _id: string;
  account_id: string;
  key_id: string;
  model: string;
  kind: 'video' | 'chat' | 'image';
  day: string;
  requests: number;
  video_seconds: number;
  input_tokens: number;
  output_tokens: number;
  images: number;
  spend_micros: number;
  created_at: Date;
}

export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** Usage records with `shortfallMicros` taken off their spend, largest first: a lease whose
 * calls cost more than the ledger could collect (an overage the balance lacked) then records
 * what was collected, so per-key spend adds up to the ledger's. */
export function withShortfall<Record extends Pick<UsageRecord, 'spend_micros'>>(records: Record[], shortfallMicros: number): Record[] {
  let left = shortfallMicros;
  const adjusted = records.map((record) => ({ ...record }));
  for (const record of [...adjusted].sort((first, second) => second.spend_micros - first.spend_micros)) {
    if (left <= 0) break;
    const taken = Math.min(left, record.spend_micros);
    record.spend_micros -= taken;
    left -= taken;
  }
  return adjusted;
}

export class UsageStore {
  readonly collection: Collection<UsageRecord>;

  constructor(db: Db) {
    this.collection = db.collection<UsageRecord>('usage');
  }

  async record(record: Omit<UsageRecord, 'day' | 'created_at'> & { at?: Date }): Promise<void> {
    const at = record.at ?? new Date();
    const { at: _ignored, ...fields } = record;
    try {
      await this.collection.insertOne({ ...fields, day: utcDay(at), created_at: at });
    } catch (error) {
      if (isDuplicateKey(error)) return;
      throw error;
    }
  }

  /** Writes every record over what is there under its id: a spend lease's records, written to
   * what the ledger collected by whoever settles it (its process, retired-leases.ts in
   * api/services/billing, or store/expired-leases.ts), over those of whoever settled it first. */
  async replaceMany(records: ReadonlyArray<Omit<UsageRecord, 'day' | 'created_at'> & { at: Date }>): Promise<void> {
    if (records.length === 0) return;
    await this.collection.bulkWrite(
      records.map(({ at, ...fields }) => ({ replaceOne: { filter: { _id: fields._id }, replacement: { ...fields, day: utcDay(at), created_at: at }, upsert: true } })),
      { ordered: false },
    );
  }
}
