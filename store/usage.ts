import { MongoServerError, type Collection, type Db } from 'mongodb';

// One usage record per billed event, under a deterministic id, so a retried activity cannot
// count twice. `day` is precomputed (UTC) because FerretDB's aggregation has no date operators,
// so per-key reports can be a $match on key and day range plus a $group.

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
      if (error instanceof MongoServerError && error.code === 11000) return;
      throw error;
    }
  }

}
