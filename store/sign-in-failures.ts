import { createHmac } from 'node:crypto';
import { ObjectId, type Collection, type Db } from 'mongodb';

// Failed console sign-ins (api/console/sign-in-throttle.ts counts them), in the store so that
// every api process counts the same attempts: kept in each process's memory, N processes let
// N times the guesses through, and a restart forgot them all.
//
// An attempt is one document listing the counts it belongs to (an email from an address, the
// address, the email), inserted when the attempt is let through and deleted when it is taken
// back. The counts' names are HMAC-SHA-256 digests under a key the store does not hold (from
// ADMIN_TOKEN): a plain hash of an address or an email is undone by trying every IPv4 address
// or the emails of the accounts collection. An email's trusted addresses (those it signed in
// from) are documents of their own.
// FerretDB has no TTL indexes: whoever records attempts deletes old ones now and then.

export interface SignInFailureDocument {
  _id: ObjectId;
  /** The digests of the counts the attempt belongs to. */
  counts: string[];
  at: Date;
}

interface SignInTrustDocument {
  /** The digest of an email-from-address count. */
  _id: string;
  at: Date;
}

const PRUNE_EVERY_MS = 60_000;

export class SignInFailureStore {
  readonly failures: Collection<SignInFailureDocument>;
  private readonly trust: Collection<SignInTrustDocument>;
  private lastPrune = 0;

  constructor(
    db: Db,
    /** Keys the digests of the counts' names; the same in every api process. */
    private readonly digestKey: Buffer,
  ) {
    this.failures = db.collection<SignInFailureDocument>('console_sign_in_failures');
    this.trust = db.collection<SignInTrustDocument>('console_sign_in_trust');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('console_sign_in_failures').createIndex({ counts: 1, at: -1 }, { name: 'by_count' });
  }

  /** The name a count is stored under. */
  digest(name: string): string {
    return createHmac('sha256', this.digestKey).update(name).digest('hex');
  }

  async add(counts: string[], at: Date): Promise<ObjectId> {
    const _id = new ObjectId();
    await this.failures.insertOne({ _id, counts, at });
    return _id;
  }

  async remove(id: ObjectId): Promise<void> {
    await this.failures.deleteOne({ _id: id });
  }

  /** The times of the count's attempts since `since`, newest first, at most `limit`. */
  async newest(count: string, since: Date, limit: number): Promise<Date[]> {
    const found = await this.failures.find({ counts: count, at: { $gt: since } }, { projection: { at: 1 } }).sort({ at: -1 }).limit(limit).toArray();
    return found.map((failure) => failure.at);
  }

  /** Forgets every attempt of the count (a successful sign-in clears its own). */
  async clear(count: string): Promise<void> {
    await this.failures.deleteMany({ counts: count });
  }

  async trustedSince(count: string): Promise<Date | null> {
    return (await this.trust.findOne({ _id: count }))?.at ?? null;
  }

  async trustFrom(count: string, at: Date): Promise<void> {
    await this.trust.updateOne({ _id: count }, { $set: { at } }, { upsert: true });
  }

  /** Deletes attempts older than `failuresBefore` and trust older than `trustBefore`, at most
   * once a minute per process, in the background. */
  pruneNowAndThen(now: number, failuresBefore: Date, trustBefore: Date): void {
    if (now - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = now;
    void Promise.all([this.failures.deleteMany({ at: { $lt: failuresBefore } }), this.trust.deleteMany({ at: { $lt: trustBefore } })]).catch(() => {
      // The next prune deletes them: old attempts are outside every window anyway.
    });
  }
}
