import { ObjectId, type Collection, type Db } from 'mongodb';

// Tells every API process which keys changed (revoked, limits edited), so each can keep the keys
// it read in memory for minutes instead of reading them again after a second: a caller who
// calls every few seconds then never waits for a key read. FerretDB has no change streams, so
// the feed is a small collection that every process polls.
//
// A record's `at` is the store's own clock ($currentDate), and each poll asks for what came
// after the newest record it has seen, less MARGIN_MS for inserts that became visible out of
// order: the processes' clocks play no part, so skew between them cannot hide a record. Each
// record reaches the listener once. Records RETAIN_MS older than the newest are deleted by
// whichever process polls; a process whose polls failed for longer than RETAIN_MS - MARGIN_MS
// may have missed some, and forgets every key.

export const KEY_CHANGE_POLL_MS = 250;
const MARGIN_MS = 5_000;
const RETAIN_MS = 60_000;
const PRUNE_EVERY_MS = 30_000;
// A process whose polls fail that long forgets every key anyway (lost()).
const RECORD_RETRIES = 50;
const RECORD_RETRY_MS = 1_000;

/** A change to a key, or to an account's rate limits (the accounts' overrides are cached by
 * every api process too: api/services/rate-limits/account-limits.ts). */
interface KeyChange {
  _id: ObjectId;
  key_id?: string;
  account_id?: string;
  /** A key created: nothing cached changes, but every process learns that the key exists
   * (store/known-key-ids.ts). */
  created_key_id?: string;
  at: Date;
}

type Subject = { key_id: string } | { account_id: string } | { created_key_id: string };

export class KeyChangeFeed {
  private readonly collection: Collection<KeyChange>;
  /** Local time the last successful poll started: every change visible then has been seen. */
  private seenUntil = 0;
  /** Store time of the newest record seen. */
  private newestAt: number | undefined;
  /** Records already reported that a poll can still return (hex id → store time). */
  private readonly reported = new Map<string, number>();
  private lastPrune = 0;
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    db: Db,
    private readonly listener: {
      /** A key changed; called once per recorded change. */
      changed(keyId: string): void;
      /** An account's rate limits changed; called once per recorded change. */
      accountChanged?(accountId: string): void;
      /** A key was created; called once per recorded creation. */
      created?(keyId: string): void;
      /** Changes may have been missed: forget everything read so far. */
      lost(): void;
    },
  ) {
    this.collection = db.collection<KeyChange>('api_key_changes');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('api_key_changes').createIndex({ at: 1 }, { name: 'by_time' });
  }

  /** Whether it polls: a feed that polls but whose polls fail is an outage, one stopped is not
   * watched at all. */
  get running(): boolean {
    return this.timer !== undefined;
  }

  /** Every change visible before this local time has reached the listener; 0 until a poll succeeded. */
  get coveredUntil(): number {
    return this.seenUntil;
  }

  async record(keyId: string): Promise<void> {
    await this.write({ key_id: keyId });
  }

  /** Announces a key just created to every process (the listener's `created`). */
  async recordCreation(keyId: string): Promise<void> {
    await this.write({ created_key_id: keyId });
  }

  private async write(subject: Subject): Promise<void> {
    await this.collection.updateOne({ _id: new ObjectId() }, { $currentDate: { at: true }, $setOnInsert: subject }, { upsert: true });
  }

  /**
   * Runs a change to a key between two records of it. The first comes before the change, so a
   * store that cannot take it fails the caller before anything changed; the second after it, for
   * processes that read the key between the two writes. The second is retried in the background
   * if it fails: the change itself went through, and the first record already told the others.
   */
  recordAround<T>(keyId: string, change: () => Promise<T>): Promise<T> {
    return this.around({ key_id: keyId }, change);
  }

  /** recordAround for a change to an account's rate limits: without it, a process that read
   * them and then served the account nothing for a while answered its next calls under the old
   * limits until its next refresh round had read them again (a burst after a pause passed in
   * full under a limit lowered seconds before). */
  recordAccountAround<T>(accountId: string, change: () => Promise<T>): Promise<T> {
    return this.around({ account_id: accountId }, change);
  }

  private async around<T>(subject: Subject, change: () => Promise<T>): Promise<T> {
    await this.write(subject);
    const result = await change();
    await this.write(subject).catch(() => this.recordLater(subject, 1));
    return result;
  }

  private recordLater(subject: Subject, attempt: number): void {
    if (attempt > RECORD_RETRIES) return;
    setTimeout(() => {
      this.write(subject).catch(() => this.recordLater(subject, attempt + 1));
    }, RECORD_RETRY_MS).unref();
  }

  /** Polls every KEY_CHANGE_POLL_MS until stop(); the timer does not keep the process alive. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.poll(), KEY_CHANGE_POLL_MS);
    this.timer.unref();
    void this.poll();
  }

  /** Until start() again; a restart after a long stop forgets every key (lost()). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One poll; a failed one leaves coveredUntil where it was, so cached keys age out. */
  async poll(now = Date.now()): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const filter = this.newestAt === undefined ? {} : { at: { $gt: new Date(this.newestAt - MARGIN_MS) } };
      const changes = await this.collection.find(filter, { projection: { key_id: 1, account_id: 1, created_key_id: 1, at: 1 } }).toArray();
      if (this.seenUntil !== 0 && now - this.seenUntil > RETAIN_MS - MARGIN_MS) this.listener.lost();
      for (const change of changes) {
        const id = change._id.toHexString();
        const at = change.at.getTime();
        if (this.newestAt === undefined || at > this.newestAt) this.newestAt = at;
        if (this.reported.has(id)) continue;
        this.reported.set(id, at);
        if (change.key_id !== undefined) this.listener.changed(change.key_id);
        if (change.account_id !== undefined) this.listener.accountChanged?.(change.account_id);
        if (change.created_key_id !== undefined) this.listener.created?.(change.created_key_id);
      }
      this.seenUntil = now;
      // What the next poll cannot return need not be remembered.
      for (const [id, at] of this.reported) if (at <= this.newestAt! - MARGIN_MS) this.reported.delete(id);
      if (this.newestAt !== undefined && now - this.lastPrune >= PRUNE_EVERY_MS) {
        this.lastPrune = now;
        await this.collection.deleteMany({ at: { $lt: new Date(this.newestAt - RETAIN_MS) } });
      }
    } catch {
      // The store is unreachable: nothing is vouched for beyond the last poll.
    } finally {
      this.polling = false;
    }
  }
}
