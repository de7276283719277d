import type { Collection, Db } from 'mongodb';
import { upsertOnceMore } from './duplicate-keys.ts';
import { insertMissing, migrateOnce } from './migrations.ts';

// An operator's overrides of the per-minute limits, each in a document of its own: one per
// account in account_rate_limits, one per key in api_key_rate_limits, _id the account's or the
// key's. They used to be a field of the account and key documents. FerretDB applies an update as
// a read-modify-write of the whole document without isolation, so a key's limits set while the
// key was being revoked could write it back live, and an account's limits set during a webhook
// secret rotation could lose the new secret (or the rotation the limits). Nothing else writes
// these documents, and setting limits writes nothing else.

export interface RateLimitOverrides {
  requests_per_minute?: number | null;
  tokens_per_minute?: number | null;
}

export interface RateLimitOverrideDocument {
  _id: string;
  rate_limits: RateLimitOverrides | null;
}

export function accountOverrides(db: Db): Collection<RateLimitOverrideDocument> {
  return db.collection<RateLimitOverrideDocument>('account_rate_limits');
}

export function keyOverrides(db: Db): Collection<RateLimitOverrideDocument> {
  return db.collection<RateLimitOverrideDocument>('api_key_rate_limits');
}

/** Replaces the overrides of one account or key. */
export async function setOverrides(collection: Collection<RateLimitOverrideDocument>, id: string, limits: RateLimitOverrides): Promise<void> {
  await upsertOnceMore(() => collection.updateOne({ _id: id }, { $set: { rate_limits: limits } }, { upsert: true }));
}

/** The overrides of one account or key; null when none were ever set. */
export async function readOverrides(collection: Collection<RateLimitOverrideDocument>, id: string): Promise<RateLimitOverrides | null> {
  return (await collection.findOne({ _id: id }))?.rate_limits ?? null;
}

/** The overrides of several accounts or keys in one query, by id (absent: none set). */
export async function readOverridesOf(collection: Collection<RateLimitOverrideDocument>, ids: string[]): Promise<Map<string, RateLimitOverrides | null>> {
  if (ids.length === 0) return new Map();
  const found = await collection.find({ _id: { $in: ids } }).toArray();
  return new Map(found.map((document) => [document._id, document.rate_limits]));
}

/** Copies overrides still kept on account and key documents (stores from before the move) to
 * their own documents, once per store. An override already set in its own document wins: the
 * copy inserts, never overwrites. Every api process must run this version before any changes a
 * limit (README, Upgrading): an older one still writes the field this copies from. */
export async function moveLegacyOverrides(db: Db): Promise<void> {
  await migrateOnce(db, 'rate-limit-overrides-own-documents', async () => {
    for (const [from, to] of [
      [db.collection<{ _id: string; rate_limits?: RateLimitOverrides | null }>('accounts'), accountOverrides(db)],
      [db.collection<{ _id: string; rate_limits?: RateLimitOverrides | null }>('api_keys'), keyOverrides(db)],
    ] as const) {
      async function* overridesKept() {
        for await (const document of from.find({ rate_limits: { $exists: true } }, { projection: { rate_limits: 1 } })) {
          yield { _id: document._id, rate_limits: document.rate_limits ?? null };
        }
      }
      await insertMissing(to, overridesKept());
    }
  });
}
