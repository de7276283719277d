import { randomInt } from 'node:crypto';
import { MongoServerError, type Collection, type Db } from 'mongodb';

// Money lives in an append-only chain of entries per account. Entry n+1 carries the account's
// totals after its movement and is inserted under the _id `${account}:${n+1}`: the unique _id is
// a compare-and-swap (two writers racing for the same n+1 cannot both win), and a unique `op_id`
// makes each (reference, operation) apply at most once, forever.
//
// Why not `$inc` on an account document: FerretDB 1.24 (the local store) applies updates as
// read-modify-write without isolation; 50 concurrent `$inc`s of 1 leave the field at 1, and a
// guarded update (`balance >= x`) lets all 50 through. Unique-key inserts are the one primitive
// it (and MongoDB) make atomic, so the ledger is built on them and is correct on both.

export type LedgerOperation = 'credit' | 'hold' | 'capture' | 'release' | 'debit';

export interface Totals {
  /** Spendable money, micro-USD. Never negative: every debit checks it before its insert wins. */
  balance_micros: number;
  /** Money reserved for work in flight. */
  held_micros: number;
  spent_micros: number;
}

export interface LedgerEntry extends Totals {
  _id: string;
  account_id: string;
  seq: number;
  /** `${reference}:${slot}`; unique. Capture and release share the slot `settle`. */
  op_id: string;
  reference: string;
  operation: LedgerOperation;
  key_id: string | null;
  amount_micros: number;
  /** Capture only: the hold being settled when the final price is lower (chat: hold the worst
   * case, capture what the tokens cost, return the rest). */
  settles_hold_micros?: number;
  created_at: Date;
}

export type LedgerOutcome = 'applied' | 'insufficient_balance' | 'conflict';

const ZERO: Totals = { balance_micros: 0, held_micros: 0, spent_micros: 0 };
const MAX_ATTEMPTS = 200;

export function opIdFor(reference: string, operation: LedgerOperation): string {
  const slot = operation === 'capture' || operation === 'release' ? 'settle' : operation;
  return `${reference}:${slot}`;
}

/** The totals after the movement, or null when the account cannot afford it. */
function move(totals: Totals, operation: LedgerOperation, amount: number, hold: number): Totals | null {
  // Only the three totals: `totals` may be a whole entry, whose other fields must not leak on.
  const next: Totals = { balance_micros: totals.balance_micros, held_micros: totals.held_micros, spent_micros: totals.spent_micros };
  switch (operation) {
    case 'credit':
      next.balance_micros += amount;
      break;
    case 'hold':
      if (totals.balance_micros < amount) return null;
      next.balance_micros -= amount;
      next.held_micros += amount;
      break;
    case 'capture':
      if (totals.held_micros < hold) return null;
      next.held_micros -= hold;
      next.spent_micros += amount;
      next.balance_micros += hold - amount;
      break;
    case 'release':
      if (totals.held_micros < amount) return null;
      next.held_micros -= amount;
      next.balance_micros += amount;
      break;
    case 'debit':
      if (totals.balance_micros < amount) return null;
      next.balance_micros -= amount;
      next.spent_micros += amount;
      break;
  }
  return next;
}

function isDuplicateKey(error: unknown): boolean {
  return error instanceof MongoServerError && error.code === 11000;
}

export class Ledger {
  readonly entries: Collection<LedgerEntry>;

  constructor(db: Db) {
    this.entries = db.collection<LedgerEntry>('ledger');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    const entries = db.collection<LedgerEntry>('ledger');
    await entries.createIndex({ op_id: 1 }, { unique: true, name: 'op_id_unique' });
    await entries.createIndex({ account_id: 1, seq: -1 }, { name: 'by_account_seq' });
  }

  async totals(accountId: string): Promise<Totals> {
    const latest = await this.latest(accountId);
    return latest ? { balance_micros: latest.balance_micros, held_micros: latest.held_micros, spent_micros: latest.spent_micros } : { ...ZERO };
  }

  find(reference: string, operation: LedgerOperation): Promise<LedgerEntry | null> {
    return this.entries.findOne({ op_id: opIdFor(reference, operation) });
  }

  async apply(input: {
    accountId: string;
    keyId: string | null;
    reference: string;
    operation: LedgerOperation;
    amountMicros: number;
    /** Capture only: the amount that was held, when more than `amountMicros`. */
    heldMicros?: number;
  }): Promise<LedgerOutcome> {
    const hold = input.heldMicros ?? input.amountMicros;
    for (const value of [input.amountMicros, hold]) {
      if (!Number.isSafeInteger(value) || value < 0) throw new Error(`ledger amounts are non-negative integer micro-USD, got ${value}`);
    }
    if (hold < input.amountMicros || (input.heldMicros !== undefined && input.operation !== 'capture')) {
      throw new Error('heldMicros applies to capture only and must be at least the captured amount');
    }
    const opId = opIdFor(input.reference, input.operation);

    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // Head first, then the op: an entry the head already reflects is then surely seen below,
      // so a duplicate racing the original never mistakes the original's effect for a shortage.
      const latest = await this.latest(input.accountId);
      const existing = await this.entries.findOne({ op_id: opId });
      if (existing) return existing.operation === input.operation ? 'applied' : 'conflict';
      const next = move(latest ?? ZERO, input.operation, input.amountMicros, hold);
      if (!next) return 'insufficient_balance';
      const seq = latest ? latest.seq + 1 : 0;
      const entry: LedgerEntry = {
        _id: `${input.accountId}:${seq}`,
        account_id: input.accountId,
        seq,
        op_id: opId,
        reference: input.reference,
        operation: input.operation,
        key_id: input.keyId,
        amount_micros: input.amountMicros,
        ...next,
        created_at: new Date(),
      };
      if (hold !== input.amountMicros) entry.settles_hold_micros = hold;
      try {
        await this.entries.insertOne(entry);
        return 'applied';
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // Another movement took seq (or the same op won elsewhere): re-read and try again,
        // after a short random pause so racing writers spread out.
        await new Promise((resolve) => setTimeout(resolve, randomInt(0, 1 + Math.min(attempt, 20))));
      }
    }
    throw new Error(`ledger contention on account ${input.accountId}: gave up after ${MAX_ATTEMPTS} attempts`);
  }

  private latest(accountId: string): Promise<LedgerEntry | null> {
    return this.entries.find({ account_id: accountId }).sort({ seq: -1 }).limit(1).next();
  }
}
