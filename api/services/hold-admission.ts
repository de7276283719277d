import { GatewayError } from '../../core/errors.ts';

// Which video submissions may join their account's queue for a hold on its balance. The holds
// of one account wait for each other in this process (store/ledger.ts queues its movements),
// and a submission that does not get its hold within its deadline is answered 503. Two cases
// are refused at once instead, costing the store nothing:
// - the queue is not moving: nothing in it has got its hold for `stalledAfterMs` (the store is
//   slow or gone), so a newcomer would only wait for its own 503;
// - the queue moves, but too slowly for a newcomer to reach its hold within `deadlineMs`:
//   the time between holds, times the submissions ahead, says so.
// A queue that moves is otherwise joined, however long its oldest has waited: a few submissions
// of one account at once, on a store that takes a second a hold, wait a few seconds and are
// accepted (judged by its oldest, three at once were refused on FerretDB under load). A queue
// with no pace of its own yet (a burst from an account that was idle) is judged by the pace of
// this process's holds for every account: the store's, mostly.

/** When a refused submission may come back (a spec 503 carries Retry-After, which OpenAI-style
 * clients honour). Also video-tasks.ts's refusal at the hold deadline. */
export const RETRY_AFTER_SECONDS = '2';

interface AccountQueue {
  /** Submissions of this process waiting for their hold. */
  waiting: number;
  /** When the queue last moved: a hold got (or refused), or the queue began. */
  movedAt: number;
  /** Moving average of the time between holds, once one came. */
  holdEveryMs?: number;
}

/** Weight of the latest time between holds in the moving average. */
const LATEST_WEIGHT = 0.3;
/** How long an empty queue keeps its time between holds, for the next burst to be judged by;
 * idle queues older than that are forgotten. */
const KEPT_IDLE_MS = 60_000;
/** Idle queues are looked for once the map holds this many. */
const PRUNE_AT = 1_000;

function averaged(average: number | undefined, latest: number): number {
  return average === undefined ? latest : average + LATEST_WEIGHT * (latest - average);
}

/** A time between holds last moved at `movedAt`, if that was recent enough to go by. */
function recent(everyMs: number | undefined, movedAt: number, now: number): number | undefined {
  return now - movedAt > KEPT_IDLE_MS ? undefined : everyMs;
}

export class HoldAdmission {
  private readonly queues = new Map<string, AccountQueue>();
  /** Every account's holds in this process: the pace a queue without its own is judged by. */
  private readonly process: { holdEveryMs?: number; at: number } = { at: 0 };

  constructor(private readonly limits: { stalledAfterMs: number; deadlineMs: number }) {}

  /** Throws the 503 join() would throw now, without joining: for a caller that has work to do
   * (an Idempotency-Key to claim, and release again on a refusal) before it joins. */
  check(accountId: string, now = Date.now()): void {
    const queue = this.queues.get(accountId);
    if (queue !== undefined && queue.waiting > 0) this.refuseIfHopeless(queue, now);
  }

  /** Joins the account's queue or throws the 503 that says why not; the function returned
   * leaves it, once the submission's hold was settled either way (`at` is for tests), or
   * `withdrawn` when it was never tried (its caller answered meanwhile, video-tasks.ts). */
  join(accountId: string, now = Date.now()): (at?: number, withdrawn?: boolean) => void {
    const queue = this.queues.get(accountId) ?? this.newQueue(accountId, now);
    if (queue.waiting === 0) {
      // An empty queue is always joined: it begins again now, and its time between holds stands
      // only if recent. (Refusing there on a slow average would refuse for good: only holds
      // that come move the average.)
      queue.holdEveryMs = recent(queue.holdEveryMs, queue.movedAt, now);
      queue.movedAt = now;
    } else this.refuseIfHopeless(queue, now);
    queue.waiting++;
    let left = false;
    return (at = Date.now(), withdrawn = false) => {
      if (left) return;
      left = true;
      // A hold withdrawn at its turn took no store time: counted as one, it would make the
      // queue look fast and let in callers the store cannot serve by their deadline.
      if (withdrawn) {
        queue.waiting--;
        return;
      }
      // A hold that came after its caller's deadline (a store that hung) counts as the deadline:
      // its whole wait would tell the next callers to stay away for longer than a hold takes.
      const since = Math.min(at - queue.movedAt, this.limits.deadlineMs);
      queue.holdEveryMs = averaged(queue.holdEveryMs, since);
      this.process.holdEveryMs = averaged(recent(this.process.holdEveryMs, this.process.at, at), since);
      this.process.at = at;
      queue.movedAt = at;
      queue.waiting--;
    };
  }

  private newQueue(accountId: string, now: number): AccountQueue {
    if (this.queues.size >= PRUNE_AT) {
      for (const [id, queue] of this.queues) if (queue.waiting === 0 && now - queue.movedAt > KEPT_IDLE_MS) this.queues.delete(id);
    }
    const queue: AccountQueue = { waiting: 0, movedAt: now };
    this.queues.set(accountId, queue);
    return queue;
  }

  private refuseIfHopeless(queue: AccountQueue, now: number): void {
    if (now - queue.movedAt > this.limits.stalledAfterMs) {
      // The stall limit (2 s by default): a retry that soon finds the queue moving, or is
      // refused as fast.
      throw new GatewayError('service_unavailable', 'The balance of this account cannot be reserved quickly right now; nothing was charged. Retry with backoff.', undefined, { 'retry-after': RETRY_AFTER_SECONDS });
    }
    const every = queue.holdEveryMs ?? recent(this.process.holdEveryMs, this.process.at, now);
    if (every !== undefined && (queue.waiting + 1) * every > this.limits.deadlineMs) {
      // Until enough holds came for a newcomer to fit within the deadline.
      const fit = Math.max(0, Math.floor(this.limits.deadlineMs / every) - 1);
      const seconds = Math.max(1, Math.ceil(((queue.waiting - fit) * every) / 1000));
      throw new GatewayError(
        'service_unavailable',
        `This account has ${queue.waiting} video ${queue.waiting === 1 ? 'submission' : 'submissions'} waiting for their hold on its balance here, too many for another to get one in time; nothing was charged. Retry in about ${seconds} s.`,
        undefined,
        { 'retry-after': String(seconds) },
      );
    }
  }
}
