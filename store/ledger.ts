import { randomInt } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { MAX_ACCOUNT_FUNDS_MICROS } from '../core/money.ts';
import { isDuplicateKey } from './duplicate-keys.ts';
import { LedgerMarkers } from './ledger-markers.ts';

// Money lives in an append-only chain of entries per account. Entry n+1 carries the account's
// totals after its movement and is inserted under the _id `${account}:${n+1}`: the unique _id is
// a compare-and-swap (two writers racing for the same n+1 cannot both win), and a unique `op_id`
// makes each (reference, operation) apply at most once, forever.
//
// Why not `$inc` on an account document: FerretDB 1.24 (the local store) applies updates as
// read-modify-write without isolation; 50 concurrent `$inc`s of 1 leave the field at 1, and a
// guarded update (`balance >= x`) lets all 50 through. Unique-key inserts are the one primitive
// it (and MongoDB) make atomic, so the ledger is built on them and is correct on both.
//
// FerretDB also answers only _id lookups without scanning the collection (0.3 to 0.5 s at
// 4,000 entries), so everything is addressed by _id: the head is found from a per-account hint
// (`ledger_heads`) by probing `${account}:${seq + 1}`, and an applied operation from its marker
// (`ledger_ops`), written right after its entry. A crash between the two leaves an entry
// without its marker, so a writer marks the head it builds on before it appends: only a head
// can lack its marker, and an operation is its marker's entry or the head, or was never
// applied. (Entries from before this rule are marked once, by store/ledger-marker-migration.ts.)
// The entries and their unique indexes alone decide; hints and markers only find them.
//
// A spend lease may give part of its hold back before it settles ('trim': its unreserved rest,
// while calls still run on the rest). Trim and 'seal' share a slot as capture and release do:
// whoever releases a dead process's lease seals it first, so a late trim from a process that
// was not dead after all cannot return money the release already returned.

export type LedgerOperation = 'credit' | 'deduct' | 'hold' | 'capture' | 'release' | 'debit' | 'trim' | 'seal';

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

/** `funds_limit`: a credit that would leave the account holding more than
 * MAX_ACCOUNT_FUNDS_MICROS; nothing moved. */
export type LedgerOutcome = 'applied' | 'insufficient_balance' | 'funds_limit' | 'conflict';

const ZERO: Totals = { balance_micros: 0, held_micros: 0, spent_micros: 0 };
const MAX_ATTEMPTS = 200;

export function opIdFor(reference: string, operation: LedgerOperation): string {
  const slot = operation === 'capture' || operation === 'release' ? 'settle' : operation === 'seal' ? 'trim' : operation;
  return `${reference}:${slot}`;
}

/** The totals after the movement, or null when the account cannot afford it (or, for a credit,
 * would hold more than MAX_ACCOUNT_FUNDS_MICROS). */
function move(totals: Totals, operation: LedgerOperation, amount: number, hold: number): Totals | null {
  // Only the three totals: `totals` may be a whole entry, whose other fields must not leak on.
  const next: Totals = { balance_micros: totals.balance_micros, held_micros: totals.held_micros, spent_micros: totals.spent_micros };
  switch (operation) {
    case 'credit':
      next.balance_micros += amount;
      if (next.balance_micros + next.held_micros > MAX_ACCOUNT_FUNDS_MICROS) return null;
      break;
    case 'deduct':
      // An operator taking credit back: off the free balance, and not spending.
      if (totals.balance_micros < amount) return null;
      next.balance_micros -= amount;
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
    case 'trim':
      if (totals.held_micros < amount) return null;
      next.held_micros -= amount;
      next.balance_micros += amount;
      break;
    case 'debit':
      if (totals.balance_micros < amount) return null;
      next.balance_micros -= amount;
      next.spent_micros += amount;
      break;
    case 'seal':
      // Moves nothing: it only takes the reference's trim slot.
      break;
  }
  return next;
}


// Movements of one account are queued within a process: the compare-and-swap then only has
// to settle races between processes, instead of every concurrent request of one caller
// retrying against the others (16 parallel submissions made O(n²) store round trips).
const accountQueues = new Map<string, Promise<unknown>>();

function serialized<T>(accountId: string, work: () => Promise<T>): Promise<T> {
  const previous = accountQueues.get(accountId) ?? Promise.resolve();
  const next = previous.then(work, work);
  const settled = next.catch(() => undefined);
  accountQueues.set(accountId, settled);
  void settled.then(() => {
    if (accountQueues.get(accountId) === settled) accountQueues.delete(accountId);
  });
  return next;
}

/** apply() of a movement whose `stillWanted` said no when its turn came: nothing was applied. */
export class MovementWithdrawn extends Error {
  constructor(reference: string, operation: LedgerOperation) {
    super(`the ${operation} of ${reference} was no longer wanted when its turn came; nothing was applied`);
    this.name = 'MovementWithdrawn';
  }
}

export class Ledger {
  readonly entries: Collection<LedgerEntry>;
  private readonly markers: LedgerMarkers;
  private readonly heads: Collection<{ _id: string; seq: number }>;
  constructor(db: Db) {
    this.entries = db.collection<LedgerEntry>('ledger');
    this.markers = new LedgerMarkers(db, this.entries);
    this.heads = db.collection<{ _id: string; seq: number }>('ledger_heads');
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

  /** The totals, with the sequence number of the entry they are read from (-1 before any): what
   * other entries of the account came before them. */
  async snapshot(accountId: string): Promise<Totals & { seq: number }> {
    const latest = await this.latest(accountId);
    return latest ? { balance_micros: latest.balance_micros, held_micros: latest.held_micros, spent_micros: latest.spent_micros, seq: latest.seq } : { ...ZERO, seq: -1 };
  }

  /** The entry of the reference's operation, found by its marker alone, so an entry whose
   * marker a crash left unwritten (an account's head) reads as missing. For figures shown,
   * never for money moved. */
  async findMarked(reference: string, operation: LedgerOperation): Promise<LedgerEntry | null> {
    return this.markers.entryOf(opIdFor(reference, operation));
  }

  /** The entry of the reference's operation on the account's chain, or null when it was never
   * applied: its marker's entry, or else the head. */
  async find(accountId: string, reference: string, operation: LedgerOperation): Promise<LedgerEntry | null> {
    const opId = opIdFor(reference, operation);
    const ofAccount = (entry: LedgerEntry | null) => (entry?.account_id === accountId ? entry : null);
    const marked = await this.markers.entryOf(opId);
    if (marked) return ofAccount(marked);
    const head = await this.latest(accountId);
    if (head?.op_id === opId) return head;
    // Marked, and built on, between the look above and the head's read.
    return ofAccount(await this.markers.entryOf(opId));
  }

  async apply(input: {
    accountId: string;
    keyId: string | null;
    reference: string;
    operation: LedgerOperation;
    amountMicros: number;
    /** Capture only: the amount that was held, when more than `amountMicros`. */
    heldMicros?: number;
    /** Debit only: take what the balance has when it is less than `amountMicros` (the entry
     * records what was taken) instead of refusing. */
    upToBalance?: boolean;
    /** Asked when the movement's turn comes, after the account's movements queued before it in
     * this process: false withdraws it (apply throws MovementWithdrawn). A video hold whose
     * caller was already answered 503 would only add itself and its release to that queue. */
    stillWanted?: () => boolean;
  }): Promise<LedgerOutcome> {
    const hold = input.heldMicros ?? input.amountMicros;
    for (const value of [input.amountMicros, hold]) {
      if (!Number.isSafeInteger(value) || value < 0) throw new Error(`ledger amounts are non-negative integer micro-USD, got ${value}`);
    }
    if (hold < input.amountMicros || (input.heldMicros !== undefined && input.operation !== 'capture')) {
      throw new Error('heldMicros applies to capture only and must be at least the captured amount');
    }
    if (input.upToBalance && input.operation !== 'debit') throw new Error('upToBalance applies to debit only');
    return serialized(input.accountId, () => {
      if (input.stillWanted && !input.stillWanted()) throw new MovementWithdrawn(input.reference, input.operation);
      return this.applyNow(input, hold);
    });
  }

  private async applyNow(
    input: { accountId: string; keyId: string | null; reference: string; operation: LedgerOperation; amountMicros: number; upToBalance?: boolean },
    hold: number,
  ): Promise<LedgerOutcome> {
    const opId = opIdFor(input.reference, input.operation);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // Head first, then the op: an entry the head already reflects is then surely seen below,
      // so a duplicate racing the original never mistakes the original's effect for a shortage.
      const latest = await this.latest(input.accountId);
      const marker = await this.markers.find(opId);
      if (marker) return marker.operation === input.operation ? 'applied' : 'conflict';
      if (latest?.op_id === opId) {
        await this.remember(latest);
        return latest.operation === input.operation ? 'applied' : 'conflict';
      }
      const amountMicros = input.upToBalance ? Math.min(input.amountMicros, latest?.balance_micros ?? 0) : input.amountMicros;
      const next = move(latest ?? ZERO, input.operation, amountMicros, hold);
      if (!next) {
        // The same operation may have gone in above that head since it was read, its marker not
        // yet written (a retried video's task id, held by its workflow): a refusal stands only
        // on a head that is still the head.
        if ((await this.latest(input.accountId))?._id !== latest?._id) continue;
        return input.operation === 'credit' ? 'funds_limit' : 'insufficient_balance';
      }
      if (latest) await this.markers.ensureMarked(latest);
      const seq = latest ? latest.seq + 1 : 0;
      const entry: LedgerEntry = {
        _id: `${input.accountId}:${seq}`,
        account_id: input.accountId,
        seq,
        op_id: opId,
        reference: input.reference,
        operation: input.operation,
        key_id: input.keyId,
        amount_micros: amountMicros,
        ...next,
        created_at: new Date(),
      };
      if (hold !== input.amountMicros) entry.settles_hold_micros = hold;
      try {
        await this.entries.insertOne(entry);
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        if (!(await this.entries.findOne({ _id: entry._id }))) {
          // The seq was free, so the op_id was not: the same operation is applied below the head
          // read above, yet it had no marker. Only an entry from before the marking rule can be
          // so (a store the migration has not seen): look it up the slow way.
          const applied = await this.appliedWithoutMarker(opId, input.operation);
          if (applied) return applied;
        }
        // Another movement took this seq: re-read, after a short random pause.
        await new Promise((resolve) => setTimeout(resolve, randomInt(0, 1 + Math.min(attempt, 20))));
        continue;
      }
      await this.remember(entry);
      return 'applied';
    }
    throw new Error(`ledger contention on account ${input.accountId}: gave up after ${MAX_ATTEMPTS} attempts`);
  }

  /** The chain head: from the hint, probe forward by _id (entries are contiguous from 0). */
  private async latest(accountId: string): Promise<LedgerEntry | null> {
    const hint = await this.heads.findOne({ _id: accountId });
    let current: LedgerEntry | null = await this.entries.findOne({ _id: `${accountId}:${hint?.seq ?? 0}` });
    if (!current) return hint ? this.entries.find({ account_id: accountId }).sort({ seq: -1 }).limit(1).next() : null;
    for (;;) {
      const following: LedgerEntry | null = await this.entries.findOne({ _id: `${accountId}:${current.seq + 1}` });
      if (!following) return current;
      current = following;
    }
  }

  /** The slow path (by the op_id index, a scan on stock FerretDB) for an entry from before the
   * marking rule. */
  private async appliedWithoutMarker(opId: string, operation: LedgerOperation): Promise<LedgerOutcome | null> {
    const entry = await this.entries.findOne({ op_id: opId });
    if (!entry) return null;
    await this.remember(entry);
    return entry.operation === operation ? 'applied' : 'conflict';
  }

  private async remember(entry: LedgerEntry): Promise<void> {
    await this.markers.mark(entry);
    // A hint may briefly go backwards under races; probing forward makes that harmless.
    await this.heads.updateOne({ _id: entry.account_id }, { $set: { seq: entry.seq } }, { upsert: true }).catch((error: unknown) => {
      if (!isDuplicateKey(error)) throw error;
    });
  }
}
