import type { Collection, Db } from 'mongodb';

// Tells every API process which keys changed (revoked, limits edited), so each can keep the keys
// it read in memory for minutes instead of reading them again after a second: a caller who
// calls every few seconds then never waits for a key read. FerretDB has no change streams, so
// the feed is a small collection that every process polls.
//
// A change is recorded after the key's own update, so a process that drops its cached read on
// seeing the record reads the updated key. A record is looked for until MARGIN_MS after its
// `at` (written by the changing process's clock): clock skew and a slow insert up to that long
// cannot hide it. Records older than RETAIN_MS are deleted by whichever process polls; a
// process whose polls failed for longer than that may have missed some, and forgets every key.

export const KEY_CHANGE_POLL_MS = 250;
const MARGIN_MS = 5_000;
const RETAIN_MS = 60_000;
const PRUNE_EVERY_MS = 30_000;

interface KeyChange {
  key_id: string;
  at: Date;
}

export class KeyChangeFeed {
  private readonly collection: Collection<KeyChange>;
  /** Local time the last successful poll started: every change visible then has been seen. */
  private seenUntil = 0;
  private lastPrune = 0;
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private stopped = false;

  constructor(
    db: Db,
    private readonly listener: {
      /** A key changed; called again for each poll within MARGIN_MS of the change. */
      changed(keyId: string): void;
      /** Changes may have been missed: forget everything read so far. */
      lost(): void;
    },
  ) {
    this.collection = db.collection<KeyChange>('api_key_changes');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('api_key_changes').createIndex({ at: 1 }, { name: 'by_time' });
  }

  /** Every change visible before this local time has reached the listener; 0 until a poll succeeded. */
  get coveredUntil(): number {
    return this.seenUntil;
  }

  async record(keyId: string): Promise<void> {
    await this.collection.insertOne({ key_id: keyId, at: new Date() });
  }

  /** Polls every KEY_CHANGE_POLL_MS until stop(); the timer does not keep the process alive. */
  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => void this.poll(), KEY_CHANGE_POLL_MS);
    this.timer.unref();
    void this.poll();
  }

  /** For good: a stopped feed is never started again. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One poll; a failed one leaves coveredUntil where it was, so cached keys age out. */
  async poll(now = Date.now()): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const since = new Date((this.seenUntil || now) - MARGIN_MS);
      const changes = await this.collection.find({ at: { $gt: since } }, { projection: { key_id: 1 } }).toArray();
      if (this.seenUntil !== 0 && now - this.seenUntil > RETAIN_MS - MARGIN_MS) this.listener.lost();
      for (const change of changes) this.listener.changed(change.key_id);
      this.seenUntil = now;
      if (now - this.lastPrune >= PRUNE_EVERY_MS) {
        this.lastPrune = now;
        await this.collection.deleteMany({ at: { $lt: new Date(now - RETAIN_MS) } });
      }
    } catch {
      // The store is unreachable: nothing is vouched for beyond the last poll.
    } finally {
      this.polling = false;
    }
  }
}
