import type { Collection, Db } from 'mongodb';
import { generateApiKey, hashApiKey } from '../core/api-keys.ts';

export interface ApiKeyDocument {
  _id: string;
  account_id: string;
  name: string;
  /** SHA-256 of the plaintext; the plaintext itself is never stored. */
  hash: string;
  prefix: string;
  last4: string;
  /** Model ids this key may use; null means every model. */
  models: string[] | null;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** A key's id is derived from its hash, so authentication is a single _id lookup (the one
 * query FerretDB answers without scanning the collection). 96 bits of a SHA-256 of a 256-bit
 * random secret reveal nothing useful about it. */
export function keyIdForHash(hash: string): string {
  return `key_${hash.slice(0, 24)}`;
}

// last_used_at is a hint for the console, not an audit log: writing it on every request would
// double the database load of the hot path, so it is refreshed at most once a minute per key.
const LAST_USED_REFRESH_MS = 60_000;

export class ApiKeyStore {
  readonly collection: Collection<ApiKeyDocument>;
  private readonly lastUsedWrites = new Map<string, number>();

  constructor(db: Db) {
    this.collection = db.collection<ApiKeyDocument>('api_keys');
  }

  async create(input: { accountId: string; name: string; models: string[] | null }): Promise<{ key: ApiKeyDocument; plaintext: string }> {
    const generated = generateApiKey();
    const key: ApiKeyDocument = {
      _id: keyIdForHash(generated.hash),
      account_id: input.accountId,
      name: input.name,
      hash: generated.hash,
      prefix: generated.prefix,
      last4: generated.last4,
      models: input.models,
      created_at: new Date(),
      revoked_at: null,
      last_used_at: null,
    };
    await this.collection.insertOne(key);
    return { key, plaintext: generated.plaintext };
  }

  /** The live (unrevoked) key with this plaintext, or null. */
  async findActiveByPlaintext(plaintext: string): Promise<ApiKeyDocument | null> {
    const hash = hashApiKey(plaintext);
    const key = await this.collection.findOne({ _id: keyIdForHash(hash) });
    return key && key.hash === hash && key.revoked_at === null ? key : null;
  }

  listForAccount(accountId: string): Promise<ApiKeyDocument[]> {
    return this.collection.find({ account_id: accountId }).sort({ created_at: -1 }).toArray();
  }

  async revoke(keyId: string): Promise<ApiKeyDocument | null> {
    const revoked = await this.collection.findOneAndUpdate(
      { _id: keyId, revoked_at: null },
      { $set: { revoked_at: new Date() } },
      { returnDocument: 'after' },
    );
    return revoked ?? (await this.collection.findOne({ _id: keyId }));
  }

  noteUsed(keyId: string, now = Date.now()): void {
    const last = this.lastUsedWrites.get(keyId) ?? 0;
    if (now - last < LAST_USED_REFRESH_MS) return;
    this.lastUsedWrites.set(keyId, now);
    // Fire and forget: a failed hint must never fail the request it rides on.
    this.collection.updateOne({ _id: keyId }, { $set: { last_used_at: new Date(now) } }).catch(() => {});
  }
}
