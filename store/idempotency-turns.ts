import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';
import type { StoreClock } from './store-clock.ts';

// Steps on an Idempotency-Key record that two attempts may race for. A claim of the record
// (its insert, or a take-over, at a time that names it) ends once: its holder completes or
// releases it, or, once the holder fell silent (its process died), a retry takes it over. And
// a record past its 24 hours is replaced by one of the retries that find it. Each of those is a
// write guarded by the claim's time (`created_at`). On MongoDB that write alone decides.
// FerretDB 1.24 runs a guarded write as a read, then a write by _id, with no isolation between
// them: two retries could both take one record over, a stalled holder's release could delete
// the record a retry had just taken over, and two claims could each delete the record the
// other had just inserted in place of the expired one (two tasks, two charges). A unique insert
// is atomic on both stores, so the attempt that inserts the turn for (record, claim) takes the
// step; the others do nothing (a retry answers 409).
//
// A taker writes at once after its turn. One that died between the two leaves the record as it
// was: its turn counts as abandoned after ABANDONED_TURN_MS, and the next attempt takes the
// following round's. A turn that old whose step did happen has changed the claim's time, so the
// guarded write of whoever takes the next round finds nothing to write.

/** After this long a turn whose step never happened was taken by a process that died. */
export const ABANDONED_TURN_MS = 30_000;
/** Turns are kept this long, well past any step they decide; the sweeper deletes them then. */
const TURN_KEPT_MS = 60 * 60 * 1_000;

/** `end` (by the claim's holder), `recover` (a retry completing a silent holder's claim with the
 * answer its work left, api/plugins/idempotency.ts) and `take-over` end a claim, one of them
 * only; `replace` is of an expired record. */
export type IdempotencyStep = 'end' | 'recover' | 'take-over' | 'replace';

/** A taker writes only this long after its turn: past it, the turn may be taken for abandoned
 * (a store slow enough to stall the taker that long is slow for the next one too), and its
 * write is dropped. */
export const TURN_WRITES_WITHIN_MS = 20_000;

interface Turn {
  /** `${claim or replace}:${recordId}@${claim time}#${round}` */
  _id: string;
  step: IdempotencyStep;
  at: Date;
  expires_at: Date;
}

export class IdempotencyTurns {
  readonly collection: Collection<Turn>;

  constructor(
    db: Db,
    private readonly clock: StoreClock,
  ) {
    this.collection = db.collection<Turn>('idempotency_turns');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('idempotency_turns').createIndex({ expires_at: 1 }, { name: 'by_expiry' });
  }

  /** Whether this caller takes `step` on the record's claim made at `claimedAt`: null when
   * another took it lately, else whether its write is still in time (TURN_WRITES_WITHIN_MS),
   * to ask just before the write. The holder's `end` is its own to take again (a write it
   * retries). */
  async take(step: IdempotencyStep, recordId: string, claimedAt: Date): Promise<(() => boolean) | null> {
    const kind = step === 'replace' ? 'replace' : 'claim';
    for (let round = 0; ; round++) {
      const _id = `${kind}:${recordId}@${claimedAt.getTime()}#${round}`;
      const now = this.clock.now();
      try {
        await this.collection.insertOne({ _id, step, at: new Date(now), expires_at: new Date(now + TURN_KEPT_MS) });
        return () => this.clock.now() - now < TURN_WRITES_WITHIN_MS;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
      const taken = await this.collection.findOne({ _id });
      // Deleted meanwhile (kept past its hour): this round is free again.
      if (taken === null) {
        round--;
        continue;
      }
      // The holder's own earlier try: what counts is whether a take-over came after it.
      if (step === 'end' && taken.step === 'end') continue;
      if (now - taken.at.getTime() < ABANDONED_TURN_MS) return null;
    }
  }

  async deleteExpired(now: Date): Promise<number> {
    return (await this.collection.deleteMany({ expires_at: { $lt: now } })).deletedCount;
  }
}
