import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// Web console sign-ins of account holders, set up by an operator. The normalised email is the
// _id: signing in is one _id lookup (the only query FerretDB answers without a scan), and the
// unique _id is what keeps one email from belonging to two accounts, even under races (unique
// inserts are the one write FerretDB makes atomic).

export interface ConsoleCredentialDocument {
  /** The email, trimmed and lower-cased. */
  _id: string;
  account_id: string;
  /** core/passwords.ts format; never the password. */
  password_hash: string;
  created_at: Date;
  updated_at: Date;
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

export class ConsoleCredentialStore {
  readonly collection: Collection<ConsoleCredentialDocument>;

  constructor(db: Db) {
    this.collection = db.collection<ConsoleCredentialDocument>('console_credentials');
  }

  /** 'taken' when the email already signs in to some account. */
  async insert(input: { email: string; accountId: string; passwordHash: string }): Promise<'created' | 'taken'> {
    const now = new Date();
    try {
      await this.collection.insertOne({ _id: normaliseEmail(input.email), account_id: input.accountId, password_hash: input.passwordHash, created_at: now, updated_at: now });
      return 'created';
    } catch (error) {
      if (isDuplicateKey(error)) return 'taken';
      throw error;
    }
  }

  find(email: string): Promise<ConsoleCredentialDocument | null> {
    return this.collection.findOne({ _id: normaliseEmail(email) });
  }

  /** Sets a new password for an email of this account; false when the email is not this account's. */
  async setPassword(input: { email: string; accountId: string; passwordHash: string }): Promise<boolean> {
    const result = await this.collection.updateOne(
      { _id: normaliseEmail(input.email), account_id: input.accountId },
      { $set: { password_hash: input.passwordHash, updated_at: new Date() } },
    );
    return result.matchedCount === 1;
  }

  /** The emails that sign in to an account (by_account, store/database.ts). */
  async emailsOf(accountId: string): Promise<string[]> {
    const found = await this.collection.find({ account_id: accountId }, { projection: { _id: 1 } }).sort({ _id: 1 }).toArray();
    return found.map((credential) => credential._id);
  }
}
