import type { Collection, Db, Filter } from 'mongodb';
import { describeApiKey, generateApiKey, hashApiKey } from '../core/api-keys.ts';
import { KEY_CACHE_MAX_MS, KEY_CACHE_MS, KEY_REFRESH_AFTER_MS, keySideDocuments, readKeySettings, settleRead, sharedStateOf, type KeySideDocuments, type SharedKeyState } from './api-key-cache.ts';
import { isDuplicateKey } from './duplicate-keys.ts';
import { setKeyModels } from './key-models.ts';
import { setOverrides, type RateLimitOverrides } from './rate-limit-overrides.ts';

export interface ApiKeyDocument {
  _id: string;
  account_id: string;
  name: string;
  /** SHA-256 of the plaintext; the plaintext itself is never stored. */
  hash: string;
  prefix: string;
  last4: string;
  /** Model ids this key may use; null means every model. As created; a change since lives in a
   * document of its own (store/key-models.ts), which every read of a key joins. */
  models: string[] | null;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
  /** Per-key overrides of the per-minute limits; null means the account's. Not stored here but
   * in a document of their own (store/rate-limit-overrides.ts): every read of a key joins them. */
  rate_limits?: RateLimitOverrides | null;
}

/** A key's id is derived from its hash, so authentication is a single _id lookup (the one
 * query FerretDB answers without scanning the collection). 96 bits of a SHA-256 of a 256-bit
 * random secret reveal nothing useful about it. */
export function keyIdForHash(hash: string): string {
  return `key_${hash.slice(0, 24)}`;
}

// last_used_at is a hint for the console, not an audit log: writing it on every request would
// double the database load of the hot path, so it is refreshed at most once a minute per key.
// It lives in a collection of its own (api_key_last_use), never on the key: FerretDB applies an
// update as a read-modify-write without isolation, so a use noted while the key was being
// revoked wrote the old document back, revocation undone (15 races in 40 in a scratch run).
// Listings read it from there; a key document's own last_used_at is from before the move.
const LAST_USED_REFRESH_MS = 60_000;

interface KeyLastUse {
  _id: string;
  last_used_at: Date;
}

/** The key if it is the one hashed and not revoked. */
function liveKey(key: ApiKeyDocument | null, hash: string): ApiKeyDocument | null {
  return key && key.hash === hash && key.revoked_at === null ? key : null;
}

export class ApiKeyStore {
  readonly collection: Collection<ApiKeyDocument>;
  private readonly lastUse: Collection<KeyLastUse>;
  private readonly side: KeySideDocuments;
  private readonly lastUsedWrites = new Map<string, number>();
  private lastUsedPrunedAt = 0;
  private readonly shared: SharedKeyState;
  private watching: 'not yet' | 'yes' | 'stopped' = 'not yet';

  constructor(
    db: Db,
    /** How long keys read before stay good while the change feed polls but cannot reach the
     * store (KEY_CACHE_OUTAGE_MS): KEY_CACHE_MS unless the api asks for more. */
    private readonly outageMs = KEY_CACHE_MS,
  ) {
    this.collection = db.collection<ApiKeyDocument>('api_keys');
    this.lastUse = db.collection<KeyLastUse>('api_key_last_use');
    this.side = keySideDocuments(db);
    // Shared by every store over the same database in this process, so a revocation through
    // any of them (admin API, console) reaches authentication at once.
    this.shared = sharedStateOf(db);
  }

  /** This store no longer needs the change feed (its app is closing); the feed stops polling
   * once no store over the same database needs it. Lookups after this rely on KEY_CACHE_MS. */
  stopWatching(): void {
    if (this.watching === 'yes' && --this.shared.watchers === 0) {
      this.shared.feed.stop();
      this.shared.refresh.stop();
    }
    this.watching = 'stopped';
  }

  private watch(): void {
    this.watching = 'yes';
    if (this.shared.watchers++ === 0) {
      this.shared.feed.start();
      this.shared.refresh.start();
      void this.shared.known.list();
    }
  }

  /** A new key; with `plaintext`, the key of that plaintext (a creation under an Idempotency-Key
   * made it up before: store/key-creations.ts), and when a try under the same key inserted it
   * first, that key as it is. */
  async create(input: { accountId: string; name: string; models: string[] | null; plaintext?: string; createdAt?: Date }): Promise<{ key: ApiKeyDocument; plaintext: string }> {
    const generated = input.plaintext === undefined ? generateApiKey() : describeApiKey(input.plaintext);
    const key: ApiKeyDocument = {
      _id: keyIdForHash(generated.hash),
      account_id: input.accountId,
      name: input.name,
      hash: generated.hash,
      prefix: generated.prefix,
      last4: generated.last4,
      // Each model once, however often the request named it.
      models: input.models ? [...new Set(input.models)] : null,
      created_at: input.createdAt ?? new Date(),
      revoked_at: null,
      last_used_at: null,
    };
    let existing: ApiKeyDocument | null = null;
    try {
      await this.collection.insertOne(key);
    } catch (error) {
      existing = input.plaintext !== undefined && isDuplicateKey(error) ? await this.find(key._id) : null;
      if (!existing) throw error;
    }
    // Known here at once, and announced to the other api processes (known-key-ids.ts); again for
    // a key an earlier try inserted, which may have died before announcing it. The key exists
    // whether or not the announcement is stored: without it, the others learn of the key when
    // they list the keys again.
    this.shared.known.add(key._id);
    await this.shared.feed.recordCreation(key._id).catch(() => undefined);
    return { key: existing ?? { ...key, rate_limits: null }, plaintext: generated.plaintext };
  }

  /** Whether a key with this plaintext exists (or existed), as far as this process knows: its
   * read is then no guess (api/plugins/api-key-auth.ts, store/known-key-ids.ts). */
  mayExist(plaintext: string): boolean {
    return this.shared.known.has(keyIdForHash(hashApiKey(plaintext)));
  }

  /** The live (unrevoked) key with this plaintext, or null. With `mayRead` false, a key that
   * would need a store read of its own is not read: undefined then; one whose read is already
   * under way joins it, which costs the store nothing. */
  findActiveByPlaintext(plaintext: string, now?: number): ApiKeyDocument | null | Promise<ApiKeyDocument | null>;
  findActiveByPlaintext(plaintext: string, now: number, mayRead: boolean): ApiKeyDocument | null | Promise<ApiKeyDocument | null> | undefined;
  findActiveByPlaintext(plaintext: string, now = Date.now(), mayRead = true): ApiKeyDocument | null | Promise<ApiKeyDocument | null> | undefined {
    const { cache, revokedHere, feed, refresh } = this.shared;
    if (this.watching === 'not yet') this.watch();
    const hash = hashApiKey(plaintext);
    const id = keyIdForHash(hash);
    if (revokedHere.has(id)) return null;
    const cached = cache.get(id);
    const age = cached ? now - cached.readAt : Infinity;
    // A cached key answers synchronously (every call but the first in a while): no promise.
    // A live feed vouches for it; one that polls but cannot reach the store, for `outageMs` after
    // its last poll (a read would only wait for the same store); a stopped one, for nothing.
    const vouchedMs = feed.running ? Math.max(KEY_CACHE_MS, this.outageMs) : KEY_CACHE_MS;
    if (cached && (age < KEY_CACHE_MS || (age < KEY_CACHE_MAX_MS && now - feed.coveredUntil < vouchedMs))) {
      if (age >= KEY_REFRESH_AFTER_MS) refresh.markDue(id);
      return liveKey(cached.key, hash);
    }
    // Lookups of one key at once share a read: the first requests after a restart, or for a
    // new key, arrive together, and each had read the key (and counted, to the unknown-key
    // throttle, as a read that may find nothing: a hands-on review saw 70 of 100 such calls
    // answered 429).
    let reading = this.shared.reading.get(id);
    if (!reading) {
      if (!mayRead) return undefined;
      reading = this.read(id, now);
      this.shared.reading.set(id, reading);
      const read = reading;
      // Unless the key changed meanwhile, and a later lookup started a read of its own.
      const done = () => {
        if (this.shared.reading.get(id) === read) this.shared.reading.delete(id);
      };
      read.then(done, done);
    }
    return reading.then((key) => liveKey(key, hash));
  }

  /** Reads a key and caches what came back as of `now`, the time the read was asked for. */
  private async read(id: string, now: number): Promise<ApiKeyDocument | null> {
    const startedAt = Date.now();
    const [found, settle] = await Promise.all([this.collection.findOne({ _id: id }), readKeySettings(this.side, [id])]);
    const key = found && settle(found);
    if (!found) this.shared.known.delete(id);
    settleRead(this.shared, id, key, startedAt, now);
    return key;
  }

  /** The account's keys, newest first, with when each was last used and their own limits. */
  async listForAccount(accountId: string): Promise<ApiKeyDocument[]> {
    return this.withUseAndLimits(await this.collection.find({ account_id: accountId }).sort({ created_at: -1, _id: -1 }).toArray());
  }

  /** A page of the account's keys, newest first: at most `limit`, older than the key `afterId`
   * (one of the account's; another id starts from the newest). An account may hold thousands. */
  async listPageForAccount(accountId: string, page: { limit: number; afterId?: string }): Promise<{ keys: ApiKeyDocument[]; hasMore: boolean; isFirstPage: boolean }> {
    const query: Filter<ApiKeyDocument> = { account_id: accountId };
    const after = page.afterId ? await this.collection.findOne({ _id: page.afterId, account_id: accountId }) : null;
    if (after) query.$or = [{ created_at: { $lt: after.created_at } }, { created_at: after.created_at, _id: { $lt: after._id } }];
    const found = await this.collection.find(query).sort({ created_at: -1, _id: -1 }).limit(page.limit + 1).toArray();
    return { keys: await this.withUseAndLimits(found.slice(0, page.limit)), hasMore: found.length > page.limit, isFirstPage: after === null };
  }

  /** A key by its id, with its last use, limits and models; null when there is none. */
  async find(keyId: string): Promise<ApiKeyDocument | null> {
    const key = await this.collection.findOne({ _id: keyId });
    return key && (await this.withUseAndLimits([key]))[0]!;
  }

  /** One of the account's keys (another account's is as missing as an unknown one); the
   * arguments in TaskStore.findForAccount's order. */
  async findForAccount(keyId: string, accountId: string): Promise<ApiKeyDocument | null> {
    const key = await this.collection.findOne({ _id: keyId, account_id: accountId });
    return key ? (await this.withUseAndLimits([key]))[0]! : null;
  }

  /** The keys with when each was last used, their own limits and their models, read from where
   * they live. */
  private async withUseAndLimits(keys: ApiKeyDocument[]): Promise<ApiKeyDocument[]> {
    if (keys.length === 0) return keys;
    const ids = keys.map((key) => key._id);
    const [uses, settle] = await Promise.all([this.lastUse.find({ _id: { $in: ids } }).toArray(), readKeySettings(this.side, ids)]);
    const usedAt = new Map(uses.map((use) => [use._id, use.last_used_at]));
    for (const key of keys) {
      key.last_used_at = usedAt.get(key._id) ?? key.last_used_at ?? null;
      settle(key);
    }
    return keys;
  }

  /** Sets the key's own per-minute limits (null fields fall back to the account's); null when
   * there is no such key. Written to the limits' own document, never to the key's. */
  setRateLimits(keyId: string, limits: RateLimitOverrides): Promise<ApiKeyDocument | null> {
    return this.changeBeside(keyId, () => setOverrides(this.side.overrides, keyId, limits));
  }

  /** Replaces the models the key may use (null: every model); null when there is no such key.
   * Written to a document of the key's models, never to the key's own. Every process refuses
   * a model taken away within KEY_CACHE_MS, as it does a revoked key (store/api-key-cache.ts). */
  setModels(keyId: string, models: string[] | null): Promise<ApiKeyDocument | null> {
    return this.changeBeside(keyId, () => setKeyModels(this.side.models, keyId, models));
  }

  /** Changes one of the key's side documents (`write`), between two records of the change feed,
   * and answers the key as it now reads; null when there is no such key. Then the change is this
   * process's own: its cached read goes, and so does any read under way that started before now
   * (a background refresh that read the old models just before the write), which would
   * otherwise land in the cache as fresh until this process's own feed reported the change,
   * or be joined by the key's next lookups. */
  private async changeBeside(keyId: string, write: () => Promise<void>): Promise<ApiKeyDocument | null> {
    const updated = await this.shared.feed.recordAround(keyId, async () => {
      const key = await this.collection.findOne({ _id: keyId });
      if (!key) return null;
      await write();
      return (await this.withUseAndLimits([key]))[0]!;
    });
    this.shared.changedAt.set(keyId, Date.now());
    this.shared.cache.delete(keyId);
    // A lookup's read under way would be joined by the key's next lookups (findActiveByPlaintext).
    this.shared.reading.delete(keyId);
    return updated;
  }

  async revoke(keyId: string): Promise<ApiKeyDocument | null> {
    const { revokedHere, cache, feed } = this.shared;
    const now = Date.now();
    // No read can still be under way from that long before: the store answers for those keys.
    for (const [id, at] of revokedHere) if (now - at > KEY_CACHE_MAX_MS) revokedHere.delete(id);
    // Recorded also when it was revoked already, so retrying a revocation is never a no-op.
    return feed.recordAround(keyId, async () => {
      revokedHere.set(keyId, now);
      cache.delete(keyId);
      // The revocation is the only write to a key document after its insert (its last use and
      // its limits live elsewhere), so on FerretDB no other write can carry the document from
      // before it back.
      await this.collection.updateOne({ _id: keyId, revoked_at: null }, { $set: { revoked_at: new Date() } });
      const key = await this.collection.findOne({ _id: keyId });
      // Its last use, limits and models live in documents of their own, as for listForAccount.
      return key && (await this.withUseAndLimits([key]))[0]!;
    });
  }

  noteUsed(keyId: string, now = Date.now()): void {
    const last = this.lastUsedWrites.get(keyId) ?? 0;
    if (now - last < LAST_USED_REFRESH_MS) return;
    this.lastUsedWrites.set(keyId, now);
    // A write older than the refresh holds nothing back: forgotten, so the map keeps the keys of
    // the last few minutes rather than every key the process ever saw (a soak review's finding).
    if (now - this.lastUsedPrunedAt >= LAST_USED_REFRESH_MS) {
      this.lastUsedPrunedAt = now;
      for (const [id, at] of this.lastUsedWrites) if (now - at >= LAST_USED_REFRESH_MS) this.lastUsedWrites.delete(id);
    }
    // Fire and forget: a failed hint must never fail the request it rides on (two processes
    // inserting the first one at once: one gets a duplicate key, and the other's time stands).
    this.lastUse.updateOne({ _id: keyId }, { $set: { last_used_at: new Date(now) } }, { upsert: true }).catch(() => {});
  }
}
