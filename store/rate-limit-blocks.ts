import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// Rate-limit allowances shared by every API process. A key's allowance for one minute is cut
// into numbered blocks; a process claims a block by inserting its document, and the unique
// _id makes each block go to exactly one process. Inserts are the one write FerretDB 1.24
// keeps atomic under concurrency (it loses concurrent $inc), and they work the same on MongoDB.
// Documents of past minutes are deleted by the worker's sweeper (FerretDB has no TTL indexes).

export interface RateLimitBlock {
  /** `${kind}:${keyId}:${window}:${limit}:${block}` (api/services/rate-limits/window-allowance.ts) */
  _id: string;
  expires_at: Date;
}

export class RateLimitBlockStore {
  readonly collection: Collection<RateLimitBlock>;

  constructor(db: Db) {
    this.collection = db.collection<RateLimitBlock>('rate_limit_blocks');
  }

  /** True when this call claimed the block, false when another process already had it. */
  async claim(id: string, expiresAt: Date): Promise<boolean> {
    try {
      await this.collection.insertOne({ _id: id, expires_at: expiresAt });
      return true;
    } catch (error) {
      if (isDuplicateKey(error)) return false;
      throw error;
    }
  }

  async deleteExpired(now: Date): Promise<number> {
    return (await this.collection.deleteMany({ expires_at: { $lt: now } })).deletedCount;
  }
}
