import type { Collection, Db, Filter } from 'mongodb';
import { newId } from '../core/ids.ts';
import { isDuplicateKey } from './duplicate-keys.ts';
import { generateWebhookSecret } from '../core/webhook-signature.ts';
import { availableBalance, type TotalsWithAvailable } from './available-balance.ts';
import { BudgetLeaseStore } from './budget-leases.ts';
import { Ledger, type Totals } from './ledger.ts';
import { sharedStateOf } from './api-key-cache.ts';
import type { KeyChangeFeed } from './api-key-changes.ts';
import { accountOverrides, readOverrides, setOverrides, type RateLimitOverrideDocument, type RateLimitOverrides } from './rate-limit-overrides.ts';

/** The account's own fields. Money is not here: it lives in the ledger chain (store/ledger.ts).
 * Nor are its rate limits (store/rate-limit-overrides.ts): after its insert, only a webhook
 * secret rotation writes this document. */
export interface AccountDocument {
  _id: string;
  name: string;
  webhook_secret: string;
  /** Secrets rotated away from, newest first: deliveries are signed with each too until it
   * expires, so receivers can switch over without dropping a webhook (Standard Webhooks allows
   * several signatures), and a second rotation within the grace period does not cut the first
   * one's short. */
  previous_webhook_secrets?: PreviousWebhookSecret[];
  /** The one previous secret, as stores from before previous_webhook_secrets kept it: read,
   * and dropped at the next rotation. */
  previous_webhook_secret?: string;
  previous_webhook_secret_expires_at?: Date;
  created_at: Date;
  /** For an account created under an Idempotency-Key: what the creation asked for (hashed), so
   * a retry of it is told from another request under the same key. Written with the insert. */
  creation_fingerprint?: string;
}

export interface PreviousWebhookSecret {
  secret: string;
  expires_at: Date;
}

/** Previous secrets signing at most at once, besides the current one. */
const MAX_PREVIOUS_SECRETS = 4;

export type AccountWithTotals = AccountDocument & Totals;
/** With what it can spend now (store/available-balance.ts), its totals read with it. */
export type AccountWithAvailable = AccountWithTotals & { available_micros: number };
/** With the operator's overrides of its per-minute limits (null: none). */
export type AccountWithLimits = AccountWithAvailable & { rate_limits: RateLimitOverrides | null };

/** The previous secrets whose grace period lasts at `now`, newest first. */
export function previousSecretsInGrace(account: AccountDocument, now = new Date()): PreviousWebhookSecret[] {
  const all = [...(account.previous_webhook_secrets ?? [])];
  if (account.previous_webhook_secret !== undefined && account.previous_webhook_secret_expires_at) {
    all.push({ secret: account.previous_webhook_secret, expires_at: account.previous_webhook_secret_expires_at });
  }
  return all.filter((previous, index) => previous.expires_at.getTime() > now.getTime() && all.findIndex((other) => other.secret === previous.secret) === index);
}

/** The secrets a webhook is signed with now: the current one, and the previous ones while their
 * grace periods last. */
export function webhookSecretsInForce(account: AccountDocument, now = new Date()): string[] {
  return [account.webhook_secret, ...previousSecretsInGrace(account, now).map((previous) => previous.secret)];
}

export class AccountStore {
  readonly collection: Collection<AccountDocument>;
  private readonly ledger: Ledger;
  private readonly overrides: Collection<RateLimitOverrideDocument>;

  private readonly leases: BudgetLeaseStore;
  /** Where changes to an account's rate limits are recorded for the other api processes. */
  private readonly changes: KeyChangeFeed;

  constructor(db: Db) {
    this.collection = db.collection<AccountDocument>('accounts');
    this.ledger = new Ledger(db);
    this.overrides = accountOverrides(db);
    this.leases = new BudgetLeaseStore(db);
    this.changes = sharedStateOf(db).feed;
  }

  /** The account with what it can spend now, its totals read again with it as one snapshot. */
  async withAvailable<Account extends AccountDocument>(account: Account): Promise<Account & TotalsWithAvailable> {
    return { ...account, ...(await availableBalance({ ledger: this.ledger, leases: this.leases }, account._id)) };
  }

  /** Creates the account with its opening balance. `id` lets a caller reserve things under the
   * account's id (its console sign-in) first. With a `fingerprint` (a creation under an
   * Idempotency-Key, whose id derives from the key), an account already there under that id is
   * the same creation retried when its fingerprint matches: it is finished (its opening credit
   * moves once, by its reference) and returned as `replayed`; otherwise 'mismatch'. */
  async create(input: { name: string; balanceMicros: number; id: string; fingerprint: string }): Promise<(AccountWithTotals & { replayed?: true }) | 'mismatch'>;
  async create(input: { name: string; balanceMicros: number; id?: string }): Promise<AccountWithTotals>;
  async create(input: { name: string; balanceMicros: number; id?: string; fingerprint?: string }): Promise<(AccountWithTotals & { replayed?: true }) | 'mismatch'> {
    const account: AccountDocument = {
      _id: input.id ?? newId('acct'),
      name: input.name,
      webhook_secret: generateWebhookSecret(),
      created_at: new Date(),
      ...(input.fingerprint === undefined ? {} : { creation_fingerprint: input.fingerprint }),
    };
    let replayed = false;
    try {
      await this.collection.insertOne(account);
    } catch (error) {
      if (input.fingerprint === undefined || !isDuplicateKey(error)) throw error;
      const existing = await this.collection.findOne({ _id: account._id });
      if (existing?.creation_fingerprint !== input.fingerprint) return 'mismatch';
      Object.assign(account, existing);
      replayed = true;
    }
    // At most MAX_USD_AMOUNT by the forms, into an empty account: never past the funds limit.
    if (input.balanceMicros > 0) await this.credit(account._id, input.balanceMicros, `${account._id}:opening`);
    return { ...account, ...(await this.ledger.totals(account._id)), ...(replayed ? { replayed: true as const } : {}) };
  }

  async find(accountId: string): Promise<AccountWithTotals | null> {
    const account = await this.collection.findOne({ _id: accountId });
    return account ? { ...account, ...(await this.ledger.totals(accountId)) } : null;
  }

  /** Whether the account exists: one _id lookup, none of the ledger reads its totals take. */
  async exists(accountId: string): Promise<boolean> {
    return (await this.collection.countDocuments({ _id: accountId }, { limit: 1 })) > 0;
  }

  /** The account and its rate-limit overrides, without its money: for pages that show no
   * balance (an operator's key pages), whose lease and ledger reads would be wasted. */
  async findSettings(accountId: string): Promise<(AccountDocument & { rate_limits: RateLimitOverrides | null }) | null> {
    const [account, limits] = await Promise.all([this.collection.findOne({ _id: accountId }), readOverrides(this.overrides, accountId)]);
    return account && { ...account, rate_limits: limits };
  }

  /** The account with what it can spend now and its rate-limit overrides, for the pages that
   * show or apply them. */
  async findWithLimits(accountId: string): Promise<AccountWithLimits | null> {
    const account = await this.findSettings(accountId);
    return account && this.withAvailable(account);
  }

  /** Replaces the account's rate-limit overrides; false when there is no such account. The
   * change is recorded on the key change feed before and after the write (as a key's is), so
   * every api process drops the limits it cached within a poll of the feed. */
  async setRateLimits(accountId: string, limits: RateLimitOverrides): Promise<boolean> {
    if (!(await this.exists(accountId))) return false;
    await this.changes.recordAccountAround(accountId, () => setOverrides(this.overrides, accountId, limits));
    return true;
  }

  /** Newest first, one page at a time (a scan and a sort on FerretDB: operator pages only). */
  async list(page: { limit: number; skip: number }): Promise<AccountWithAvailable[]> {
    const accounts = await this.collection.find().sort({ created_at: -1, _id: 1 }).skip(page.skip).limit(page.limit).toArray();
    return Promise.all(accounts.map((account) => this.withAvailable(account)));
  }

  /** One page of accounts, newest first (ties by id), those after the account `after` only,
   * with what each can spend, and whether more follow (a scan and a sort on FerretDB: operators
   * only). */
  async listPage(page: { limit: number; after?: AccountDocument }): Promise<{ accounts: AccountWithAvailable[]; hasMore: boolean }> {
    const query: Filter<AccountDocument> = {};
    if (page.after) {
      const { created_at: createdAt, _id: id } = page.after;
      query.$or = [{ created_at: { $lt: createdAt } }, { created_at: createdAt, _id: { $lt: id } }];
    }
    const found = await this.collection.find(query).sort({ created_at: -1, _id: -1 }).limit(page.limit + 1).toArray();
    return { accounts: await Promise.all(found.slice(0, page.limit).map((account) => this.withAvailable(account))), hasMore: found.length > page.limit };
  }

  /** The account's own document, without its money: one read by _id. */
  findDocument(accountId: string): Promise<AccountDocument | null> {
    return this.collection.findOne({ _id: accountId });
  }

  /** A new webhook secret; the old one stays in force for `graceSeconds` (see webhookSecretsInForce). */
  async rotateWebhookSecret(accountId: string, graceSeconds: number, now = new Date()): Promise<AccountWithTotals | null> {
    const account = await this.collection.findOne({ _id: accountId });
    if (!account) return null;
    // Guarded on the secret read, so two rotations at once cannot both demote the same secret
    // (MongoDB enforces the guard; FerretDB 1.24 may not, and then the later write wins).
    const previous = [{ secret: account.webhook_secret, expires_at: new Date(now.getTime() + graceSeconds * 1000) }, ...previousSecretsInGrace(account, now)];
    await this.collection.updateOne(
      { _id: accountId, webhook_secret: account.webhook_secret },
      {
        $set: { webhook_secret: generateWebhookSecret(), previous_webhook_secrets: previous.slice(0, MAX_PREVIOUS_SECRETS) },
        $unset: { previous_webhook_secret: '', previous_webhook_secret_expires_at: '' },
      },
    );
    return this.find(accountId);
  }

  /** Ends the grace of every earlier secret now (one leaked, say): only the current one signs. */
  async retireEarlierWebhookSecrets(accountId: string): Promise<void> {
    await this.collection.updateOne({ _id: accountId }, { $unset: { previous_webhook_secrets: '', previous_webhook_secret: '', previous_webhook_secret_expires_at: '' } });
  }

  /** Adds money; `reference` makes the credit idempotent (a retried request credits once). */
  /** Adds credits; 'funds_limit' when the account would then hold more than
   * MAX_ACCOUNT_FUNDS_MICROS (nothing is added), null when there is no such account. */
  async credit(accountId: string, amountMicros: number, reference: string = newId('req')): Promise<AccountWithTotals | 'funds_limit' | null> {
    if (!(await this.collection.countDocuments({ _id: accountId }, { limit: 1 }))) return null;
    const outcome = await this.ledger.apply({ accountId, keyId: null, reference, operation: 'credit', amountMicros });
    if (outcome === 'funds_limit') return outcome;
    return this.find(accountId);
  }

  /** The amount a credit or deduction under `reference` moved, if one did (for a retried request). */
  async movedUnder(accountId: string, reference: string, operation: 'credit' | 'deduct'): Promise<number | null> {
    return (await this.ledger.find(accountId, reference, operation))?.amount_micros ?? null;
  }

  /**
   * Takes credit back (a mistaken credit, a refund paid elsewhere) from the free balance, never
   * from money held for calls and tasks in flight; it is not spending. `reference` makes it
   * idempotent. 'insufficient_balance' when the free balance is smaller: nothing is taken.
   */
  async deduct(accountId: string, amountMicros: number, reference?: string): Promise<AccountWithTotals | 'insufficient_balance' | null> {
    if (!(await this.collection.countDocuments({ _id: accountId }, { limit: 1 }))) return null;
    const outcome = await this.ledger.apply({ accountId, keyId: null, reference: reference ?? newId('req'), operation: 'deduct', amountMicros });
    if (outcome === 'insufficient_balance') return outcome;
    return this.find(accountId);
  }
}
