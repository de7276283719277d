import type { Collection, Db } from 'mongodb';
import { newId } from '../core/ids.ts';
import { generateWebhookSecret } from '../core/webhook-signature.ts';
import { Ledger, type Totals } from './ledger.ts';

/** The account's own fields. Money is not here: it lives in the ledger chain (store/ledger.ts). */
export interface AccountDocument {
  _id: string;
  name: string;
  webhook_secret: string;
  created_at: Date;
}

export type AccountWithTotals = AccountDocument & Totals;

export class AccountStore {
  readonly collection: Collection<AccountDocument>;
  private readonly ledger: Ledger;

  constructor(db: Db) {
    this.collection = db.collection<AccountDocument>('accounts');
    this.ledger = new Ledger(db);
  }

  async create(input: { name: string; balanceMicros: number }): Promise<AccountWithTotals> {
    const account: AccountDocument = {
      _id: newId('acct'),
      name: input.name,
      webhook_secret: generateWebhookSecret(),
      created_at: new Date(),
    };
    await this.collection.insertOne(account);
    if (input.balanceMicros > 0) await this.credit(account._id, input.balanceMicros, `${account._id}:opening`);
    return { ...account, ...(await this.ledger.totals(account._id)) };
  }

  async find(accountId: string): Promise<AccountWithTotals | null> {
    const account = await this.collection.findOne({ _id: accountId });
    return account ? { ...account, ...(await this.ledger.totals(accountId)) } : null;
  }

  /** Adds money; `reference` makes the credit idempotent (a retried request credits once). */
  async credit(accountId: string, amountMicros: number, reference: string = newId('req')): Promise<AccountWithTotals | null> {
    if (!(await this.collection.countDocuments({ _id: accountId }, { limit: 1 }))) return null;
    await this.ledger.apply({ accountId, keyId: null, reference, operation: 'credit', amountMicros });
    return this.find(accountId);
  }
}
