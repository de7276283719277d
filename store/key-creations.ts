import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// The records of API keys created under an Idempotency-Key (POST /admin/accounts/{id}/keys):
// one per account and Idempotency-Key, whose insert is the claim (a unique _id, atomic on
// FerretDB and MongoDB alike). It names the key it made and holds the key's plaintext, sealed
// under the Idempotency-Key (core/sealed-key-plaintext.ts), for PLAINTEXT_KEPT_MS; then the
// worker's sweeper scrubs the seal (FerretDB has no TTL indexes) and the record stays, so a
// retry after that is told which key it made rather than given a second one.

export const PLAINTEXT_KEPT_MS = 24 * 60 * 60 * 1_000;

export interface KeyCreationRecord {
  /** From the account and the Idempotency-Key (creationSecrets). */
  _id: string;
  account_id: string;
  /** The key this creation made (or, after a crash, is still to make). */
  key_id: string;
  /** The key as asked for, each model once: a retry must ask for the same. */
  name: string;
  models: string[] | null;
  /** The plaintext, sealed; null once scrubbed. */
  sealed_plaintext: string | null;
  created_at: Date;
  sealed_until: Date;
}

export class KeyCreationStore {
  readonly collection: Collection<KeyCreationRecord>;

  constructor(db: Db) {
    this.collection = db.collection<KeyCreationRecord>('api_key_creations');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('api_key_creations').createIndex({ sealed_until: 1 }, { name: 'by_seal_end' });
  }

  /** 'claimed' when this record is now the creation's; else the record a try under the same
   * key claimed before (null when it was forgotten meanwhile: claim again). */
  async claim(record: KeyCreationRecord): Promise<'claimed' | KeyCreationRecord | null> {
    try {
      await this.collection.insertOne(record);
      return 'claimed';
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    return this.collection.findOne({ _id: record._id });
  }

  /** Forgets a record whose key was never made and whose plaintext is gone (its creation died
   * halfway, more than PLAINTEXT_KEPT_MS ago), so the key can be created afresh. */
  async forget(record: KeyCreationRecord): Promise<void> {
    await this.collection.deleteOne({ _id: record._id, created_at: record.created_at });
  }

  /** Scrubs the seals past their time; the number scrubbed. */
  async scrubExpired(now: Date): Promise<number> {
    return (await this.collection.updateMany({ sealed_until: { $lt: now }, sealed_plaintext: { $ne: null } }, { $set: { sealed_plaintext: null } })).modifiedCount;
  }
}
