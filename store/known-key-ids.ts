import type { Collection } from 'mongodb';

// The ids of every key in the store (revoked ones too), held by each api process, so that the
// unknown-key throttle (api/plugins/unknown-key-throttle.ts) holds up only guesses: a real key
// that this process has no cached read of (a key just created, one idle for minutes, any key
// after a restart) is read whatever other requests from its caller's address did. Before, a
// client sending bad keys from an office's one NAT address held every new valid key there
// behind 429s for as long as it kept on.
//
// Listed once when the process starts looking keys up, then kept current: keys created here
// are added at once, keys created by another process when the change feed announces them
// (ApiKeyStore.create records each creation), and the whole list is read again when the feed
// may have missed announcements. It only ever admits a read, never refuses a key: a key missing
// from it (created a moment ago elsewhere, or while the list could not be read) goes through the
// throttle as before. An id is 28 characters: about 100 bytes a key in memory, 10 MB for
// 100,000 keys.

/** How long after a failed listing the next lookup of an uncached key lists again. */
const RETRY_AFTER_MS = 30_000;

export class KnownKeyIds {
  private readonly ids = new Set<string>();
  private listing: Promise<void> | undefined;
  /** Whether the ids may lack keys nobody announced: never listed, or announcements missed since
   * (lost), and no listing has succeeded after that. */
  private stale = true;
  /** A listing was asked for while one was under way, which may have read past the missed keys. */
  private again = false;
  private failedAt = -Infinity;

  constructor(private readonly keys: Collection<{ _id: string }>) {}

  /** Whether a key of this id exists, as far as this process knows. Lists the keys (in the
   * background) while they may lack some, at most every 30 s after a failed listing. */
  has(id: string, now = Date.now()): boolean {
    if (this.stale && this.listing === undefined && now - this.failedAt >= RETRY_AFTER_MS) void this.list();
    return this.ids.has(id);
  }

  add(id: string): void {
    this.ids.add(id);
  }

  /** A read found no key of this id (one deleted from the store): its lookups go through the
   * throttle again rather than each read the store unthrottled. */
  delete(id: string): void {
    this.ids.delete(id);
  }

  /** Lists the keys (again: announcements may have been missed); what was known stays.
   * Resolves when that listing is over, failed or not. */
  list(): Promise<void> {
    this.stale = true;
    if (this.listing) {
      this.again = true;
      return this.listing;
    }
    this.listing = this.readAll().finally(() => {
      this.listing = undefined;
      if (this.again) {
        this.again = false;
        void this.list();
      }
    });
    return this.listing;
  }

  private async readAll(): Promise<void> {
    try {
      for await (const key of this.keys.find({}, { projection: { _id: 1 }, batchSize: 10_000 })) this.ids.add(key._id);
      if (!this.again) this.stale = false;
    } catch {
      // The store is out of reach: uncached keys go through the throttle, as without the list,
      // and a later lookup lists again.
      this.failedAt = Date.now();
    }
  }
}
