import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';
import type { StoreClock } from './store-clock.ts';

// Two steps on an Idempotency-Key record that concurrent retries race for: taking over a claim
// whose attempt fell silent (its process died), and replacing a record past its 24 hours. Each
// is a write guarded by the claim's time (`created_at`). On MongoDB that write alone decides.
// FerretDB 1.24 runs a guarded write as a read, then a write by _id, with no isolation between
// them (and on a large collection the read is a scan of a second or more): two retries could
// both take one record over, or each delete the record the other had just inserted in place
// of the expired one, and both run (two tasks, two charges). A unique insert is atomic on both
// stores, so the retry that inserts the turn for (step, record, claim) takes the step; the
// others answer as if another retry had taken it (409).
//
// A taker writes at once after its turn. One that died between the two leaves the record as it
// was: its turn counts as abandoned after ABANDONED_TURN_MS, and the next retry takes the
// following round's.

/** After this long a turn whose step never happened was taken by a process that died. */
export const ABANDONED_TURN_MS = 30_000;
/** Turns are kept this long, well past any step they decide; the sweeper deletes them then. */
const TURN_KEPT_MS = 60 * 60 * 1_000;

export type IdempotencyStep = 'take-over' | 'replace';

interface Turn {
  /** `${step}:${recordId}@${claim time}#${round}` */
  _id: string;
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

  /** Whether this caller takes `step` on the record's claim made at `claimedAt`: false when
   * another took it lately. */
  async take(step: IdempotencyStep, recordId: string, claimedAt: Date): Promise<boolean> {
    for (let round = 0; ; round++) {
      const _id = `${step}:${recordId}@${claimedAt.getTime()}#${round}`;
      const now = this.clock.now();
      try {
        await this.collection.insertOne({ _id, at: new Date(now), expires_at: new Date(now + TURN_KEPT_MS) });
        return true;
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
      const taken = await this.collection.findOne({ _id });
      // Deleted meanwhile (kept past its hour): this round is free again.
      if (taken === null) {
        round--;
        continue;
      }
      if (now - taken.at.getTime() < ABANDONED_TURN_MS) return false;
    }
  }

  async deleteExpired(now: Date): Promise<number> {
    return (await this.collection.deleteMany({ expires_at: { $lt: now } })).deletedCount;
  }
}
