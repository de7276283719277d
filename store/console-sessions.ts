import { createHash, randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';

// Web console sessions. The browser holds a random token; the store holds only its SHA-256 as
// the _id, so a leaked database cannot be replayed as cookies, and finding a session is one
// _id lookup. FerretDB has no TTL indexes, so expiry is checked here on every read and expired
// sessions are deleted in code (on sight, and in a sweep after sign-ins).

export type ConsoleSessionKind = 'account' | 'operator';

export interface ConsoleSessionDocument {
  _id: string;
  kind: ConsoleSessionKind;
  /** The account an account holder's session belongs to; null for operators. */
  account_id: string | null;
  /** The email an account holder signed in with; null for operators. */
  sign_in: string | null;
  /** An HMAC, keyed by the session's token, of the secret the session was opened with (the
   * password hash, or the admin token): when that secret changes, the session no longer
   * matches and ends. */
  bound_to: string;
  created_at: Date;
  expires_at: Date;
}

const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

function sessionIdFor(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export class ConsoleSessionStore {
  readonly collection: Collection<ConsoleSessionDocument>;

  constructor(db: Db) {
    this.collection = db.collection<ConsoleSessionDocument>('console_sessions');
  }

  async create(input: { kind: ConsoleSessionKind; accountId: string | null; signIn: string | null; boundTo: (token: string) => string; ttlSeconds: number; now?: Date }): Promise<{ token: string; session: ConsoleSessionDocument }> {
    const now = input.now ?? new Date();
    const token = randomBytes(32).toString('base64url');
    const session: ConsoleSessionDocument = {
      _id: sessionIdFor(token),
      kind: input.kind,
      account_id: input.accountId,
      sign_in: input.signIn,
      bound_to: input.boundTo(token),
      created_at: now,
      expires_at: new Date(now.getTime() + input.ttlSeconds * 1000),
    };
    await this.collection.insertOne(session);
    return { token, session };
  }

  /** The live session for a cookie token; an expired one is deleted and reported as such. */
  async findByToken(token: string, now = new Date()): Promise<{ state: 'valid'; session: ConsoleSessionDocument } | { state: 'expired' | 'unknown' }> {
    // Anything not shaped like our tokens is refused without a database round trip.
    if (!TOKEN_PATTERN.test(token)) return { state: 'unknown' };
    const session = await this.collection.findOne({ _id: sessionIdFor(token) });
    if (!session) return { state: 'unknown' };
    if (session.expires_at.getTime() <= now.getTime()) {
      await this.collection.deleteOne({ _id: session._id });
      return { state: 'expired' };
    }
    return { state: 'valid', session };
  }

  async deleteByToken(token: string): Promise<void> {
    if (TOKEN_PATTERN.test(token)) await this.collection.deleteOne({ _id: sessionIdFor(token) });
  }

  /** Removes every expired session (a scan on FerretDB, hence only now and then). */
  async deleteExpired(now = new Date()): Promise<number> {
    const result = await this.collection.deleteMany({ expires_at: { $lte: now } });
    return result.deletedCount;
  }
}
