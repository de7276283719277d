import type { Collection, Db } from 'mongodb';
import { RefreshRounds } from '../core/refresh-rounds.ts';
import { KeyChangeFeed } from './api-key-changes.ts';
import { KnownKeyIds } from './known-key-ids.ts';
import type { ApiKeyDocument } from './api-keys.ts';
import { keyModels, readKeyModelsOf, type KeyModelsDocument } from './key-models.ts';
import { keyOverrides, readOverridesOf, type RateLimitOverrideDocument } from './rate-limit-overrides.ts';

// The process-wide cache of keys that authentication reads (store/api-keys.ts looks keys up
// through it).
//
// Authentication keeps the keys it read in memory: a store round trip per request would be
// most of the gateway's own latency. Revoking through the key store drops the entry at once, so
// the process that revokes refuses the key on the very next request. Other API processes learn
// of it from the change feed (api-key-changes.ts), polled every quarter second: while that feed
// is live, a cached read stays good for KEY_CACHE_MAX_MS, so a key used every few seconds is
// not read again each time. When the feed is not live (the store unreachable), a read is good
// for KEY_CACHE_MS only. Either way, another process refuses a revoked key within KEY_CACHE_MS
// of the change's record: the feed records before and after the change (see recordAround), and
// a revocation the store could not record fails before anything changed.
//
// Keys in use are read again in the background, so their callers never wait for that read; that
// also picks up changes made to the store directly. Every KEY_REFRESH_AFTER_MS, one query reads
// the keys looked up since the last round whose entry is at least that old
// (core/refresh-rounds.ts: the rounds keep their own time, never a request's).
export const KEY_CACHE_MS = 1_000;
export const KEY_CACHE_MAX_MS = 10 * 60_000;
export const KEY_REFRESH_AFTER_MS = 500;
const KEY_CACHE_ENTRIES = 10_000;
/** A cached read. */
export interface CachedKey {
  key: ApiKeyDocument;
  readAt: number;
}
/** What every store over one database shares in a process: one API instance's view. */
export interface SharedKeyState {
  cache: Map<string, CachedKey>;
  /** Reads again the keys in use whose entry is due; runs while the feed does. */
  refresh: RefreshRounds<string>;
  /** Keys revoked by this process (and when): refused even if a read from before the revocation lands in the cache. */
  revokedHere: Map<string, number>;
  /** When the feed last reported each recently changed key: a read started before that is not cached. */
  changedAt: Map<string, number>;
  feed: KeyChangeFeed;
  /** Stores that look keys up and have not stopped watching: the feed polls while there are any. */
  watchers: number;
  /** Reads of one key each under way: a lookup of that key meanwhile joins the read. */
  reading: Map<string, Promise<ApiKeyDocument | null>>;
  /** Told of each account whose rate limits the feed reports changed, and (null) when changes
   * may have been missed: the rate limiters that cache accounts' limits (watchAccountChanges). */
  accountWatchers: Set<(accountId: string | null) => void>;
  /** The ids of the keys that exist (known-key-ids.ts). */
  known: KnownKeyIds;
}
const sharedStates = new WeakMap<Db, SharedKeyState>();
const CHANGED_AT_KEEP_MS = 30_000;

export function sharedStateOf(db: Db): SharedKeyState {
  let shared = sharedStates.get(db);
  if (!shared) {
    const cache = new Map<string, CachedKey>();
    const changedAt = new Map<string, number>();
    const reading = new Map<string, Promise<ApiKeyDocument | null>>();
    const accountWatchers = new Set<(accountId: string | null) => void>();
    const feed = new KeyChangeFeed(db, {
      // Once per recorded change: the map holds the last half minute's changes, a handful.
      // A read under way may be from before the change: later lookups start their own.
      changed(keyId) {
        const now = Date.now();
        for (const [id, at] of changedAt) if (now - at > CHANGED_AT_KEEP_MS) changedAt.delete(id);
        changedAt.set(keyId, now);
        cache.delete(keyId);
        reading.delete(keyId);
      },
      // By any process (ApiKeyStore.create): nothing cached is stale, the key just exists.
      created(keyId) {
        state.known.add(keyId);
      },
      accountChanged(accountId) {
        for (const watcher of accountWatchers) watcher(accountId);
      },
      lost: () => {
        cache.clear();
        reading.clear();
        // Keys created meanwhile may not have been announced: listed again.
        void state.known.list();
        for (const watcher of accountWatchers) watcher(null);
      },
    });
    const collection = db.collection<ApiKeyDocument>('api_keys');
    const side = keySideDocuments(db);
    const state: SharedKeyState = {
      cache,
      refresh: new RefreshRounds(KEY_REFRESH_AFTER_MS, (ids) => refreshKeys(state, collection, side, ids)),
      revokedHere: new Map(),
      changedAt,
      feed,
      watchers: 0,
      reading,
      accountWatchers,
      known: new KnownKeyIds(db.collection<{ _id: string }>('api_keys')),
    };
    sharedStates.set(db, state);
    shared = state;
  }
  return shared;
}

/** Calls `watcher` with each account whose rate limits another process (or this one) changed,
 * once the change feed reports it, and with null when changes may have been missed. The feed
 * polls while the process looks keys up (ApiKeyStore), as an api process serving calls does.
 * Answers the function that stops the watching. */
export function watchAccountChanges(db: Db, watcher: (accountId: string | null) => void): () => void {
  const { accountWatchers } = sharedStateOf(db);
  accountWatchers.add(watcher);
  return () => accountWatchers.delete(watcher);
}

/** Caches a key as read at `readAt` (when the read was asked for), evicting the oldest entry when full. */
function remember(shared: SharedKeyState, key: ApiKeyDocument, readAt: number): void {
  const { cache } = shared;
  cache.delete(key._id);
  if (cache.size >= KEY_CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  cache.set(key._id, { key, readAt });
}

/** What a read started at `startedAt` found for `id`: cached, or dropped when the key is gone or
 * changed while the read ran (what came back may predate the change). */
export function settleRead(shared: SharedKeyState, id: string, key: ApiKeyDocument | null, startedAt: number, readAt: number): void {
  if (key && (shared.changedAt.get(id) ?? -Infinity) < startedAt) remember(shared, key, readAt);
  else shared.cache.delete(id);
}

/** One refresh round: the due keys in one query, their own documents (limits, models) in one
 * each. A failed round leaves their entries to age out. */
async function refreshKeys(shared: SharedKeyState, collection: Collection<ApiKeyDocument>, side: KeySideDocuments, ids: string[]): Promise<void> {
  const startedAt = Date.now();
  try {
    const [keys, settle] = await Promise.all([collection.find({ _id: { $in: ids } }).toArray(), readKeySettings(side, ids)]);
    const found = new Map(keys.map((key) => [key._id, settle(key)]));
    for (const id of ids) settleRead(shared, id, found.get(id) ?? null, startedAt, startedAt);
  } catch {
    // The store is unreachable: the entries age out, and lookups past that read in line.
  }
}

/** What lives beside the key documents, each in a document of its own per key: the key's
 * per-minute limits (store/rate-limit-overrides.ts) and its models as changed since it was
 * created (store/key-models.ts). The key document itself is written once and then only revoked. */
export interface KeySideDocuments {
  overrides: Collection<RateLimitOverrideDocument>;
  models: Collection<KeyModelsDocument>;
}

export function keySideDocuments(db: Db): KeySideDocuments {
  return { overrides: keyOverrides(db), models: keyModels(db) };
}

/** Reads the side documents of these keys (a query each, run beside whatever else the caller
 * reads); the answer puts them on a key read with them: its own limits (a field left on the key
 * document by a store from before their move is not used) and its changed models, if any. */
export async function readKeySettings(side: KeySideDocuments, ids: string[]): Promise<(key: ApiKeyDocument) => ApiKeyDocument> {
  const [limits, models] = await Promise.all([readOverridesOf(side.overrides, ids), readKeyModelsOf(side.models, ids)]);
  return (key) => {
    key.rate_limits = limits.get(key._id) ?? null;
    const changed = models.get(key._id);
    if (changed !== undefined) key.models = changed;
    return key;
  };
}
