import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// The records of API keys created under an Idempotency-Key (POST /admin/accounts/{id}/keys):
// one per account and Idempotency-Key, whose insert is the claim (a unique _id, atomic on
// FerretDB and MongoDB alike). It names the key it made and holds the key's plaintext, sealed
// under the ADMIN_TOKEN and the Idempotency-Key (core/sealed-key-plaintext.ts), for
// PLAINTEXT_KEPT_MS; then the worker's sweeper scrubs the seal (FerretDB has no TTL indexes).
// The record itself stays for good, so a retry after that is told which key it made rather than
// given a second one; nothing deletes a record, so no delete can race a claim or a scrub.

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
   * key claimed before (records are never deleted, so it is there). */
  async claim(record: KeyCreationRecord): Promise<'claimed' | KeyCreationRecord> {
    try {
      await this.collection.insertOne(record);
      return 'claimed';
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    const existing = await this.collection.findOne({ _id: record._id });
    if (!existing) throw new Error(`the key creation record ${record._id} was refused as a duplicate, and is not there`);
    return existing;
  }

  /** Scrubs one record's seal (a retry found it past its time before the sweeper did). */
  async scrub(id: string): Promise<void> {
    await this.collection.updateOne({ _id: id }, { $set: { sealed_plaintext: null } });
  }

  /** Scrubs the seals past their time; the number scrubbed. */
  async scrubExpired(now: Date): Promise<number> {
    return (await this.collection.updateMany({ sealed_until: { $lt: now }, sealed_plaintext: { $ne: null } }, { $set: { sealed_plaintext: null } })).modifiedCount;
  }
}
