import { setTimeout as sleep } from 'node:timers/promises';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import { releaseExpiredLease } from '../../../store/expired-leases.ts';
import type { Ledger } from '../../../store/ledger.ts';

// Money an account has leased to another api process and not spent is still the account's. A
// call or video submission that the free balance cannot cover asks those leases back before it
// is refused, instead of answering 403 while another process sits on an idle lease (a small one
// is kept for minutes, see account-budgets.ts). The request is a mark on the leases' documents;
// every process looks for marks on its own open leases twice a second and retires the
// marked ones, which settle and hand their unspent rest back as soon as their calls have ended;
// those that calls still run on trim their rest back at once. Then the owner writes that it
// answered the ask, so the asker does not wait for a lease all reserved by running calls (it
// wrote no trim), nor call its process one that stopped responding. The mark stays: such a
// lease trims its rest as soon as one of its calls ends.
//
// Only a caller that is actually waiting asks (or an opening for the callers of a shared account
// waiting with it, lease-openings.ts): a background renewal never does, or two busy
// processes on a nearly spent account would keep taking each other's leases away. And it asks
// only when those leases could make up the difference, so a call the account cannot afford
// anyway is refused at once. The leases of a process that died cannot answer: once expired
// (30 s after their process last pushed the expiry forward) the caller releases them itself.

export interface RecallTiming {
  /** How often a process looks for marks on its open leases. */
  recallPollMs: number;
  /** How often while it holds a lease of a shared account (shared-accounts.ts): another
   * process asked for its money lately and likely will again, and each of its callers waits for
   * the look. */
  sharedRecallPollMs: number;
  /** How long a caller waits for recalled leases to come back before it is refused. */
  recallWaitMs: number;
}

/** Between two looks at the balance while waiting for recalled leases. */
const WAIT_STEP_MS = 50;
/** How early a look for asks may come: the ticks that make them come from an interval timer,
 * whose readings of the clock are often a millisecond short of the interval, and a look due
 * every tick would then come every other tick. */
const POLL_SLACK_MS = 10;

/** Money that leases which did not answer being asked still hold. */
export interface UnansweredLeases {
  micros: number;
  /** Of `micros`, what leases opened during the wait hold: their owners are alive (they just
   * opened them) and had not looked for the ask yet, so that money comes back within a look. */
  pendingMicros: number;
  /** Until the last of the others expires (then a caller may release them), or a look's time
   * when all are pending: whole seconds from now. (A caller whose need the free balance and the
   * pending leases cover may come back after PENDING_RETRY_SECONDS: insufficient-balance.ts.) */
  retryAfterSeconds: number;
}

/** When a caller that pending leases would cover may come back: their owners look for asks
 * every recallPollMs (0.5 s by default). */
export const PENDING_RETRY_SECONDS = 1;

/** An ask another process made of one of this process's leases. */
export interface RecallAsk {
  reference: string;
  recalledAt: Date;
  /** This process answered it already. */
  answered: boolean;
}

/** Whether the owner answered the lease's latest ask. */
function answeredAsk(lease: { recalled_at?: Date; recall_answered_at?: Date }): boolean {
  return lease.recalled_at !== undefined && lease.recall_answered_at?.getTime() === lease.recalled_at.getTime();
}

export interface AskedBack {
  /** Some money was worth asking for, or a dead process's lease was released. */
  asked: boolean;
  /** The asked leases answered (or the balance covered the need) before the wait was over: what
   * they gave back may have been taken since, by the other process's new lease, say. */
  answered: boolean;
  /** When the wait ended short: the asked leases that neither settled nor gave back their rest. */
  unanswered: UnansweredLeases | null;
}

export class LeaseRecall {
  private lastPollAt = -Infinity;
  private polling = false;
  /** Leases that let an ask's wait run out unanswered, with when each expires (store clock):
   * an ask made only for callers that could be served without it does not wait for them again. */
  private readonly silent = new Map<string, number>();

  constructor(
    private readonly leases: BudgetLeaseStore,
    private readonly ledger: Ledger,
    private readonly timing: RecallTiming,
  ) {}

  /**
   * Asks the other processes' open leases of `accountId` (all but those `own()` names, this
   * process's) back when, with them, the free balance would cover `neededMicros`; resolves once the balance covers it, the leases
   * have all settled, or the wait is over. A dead process's leases (expired) are released at once.
   * Not `asked` when there was nothing worth asking for and nothing was released.
   * `wanted.micros` (at least `neededMicros`) is what the asker's waiting callers need together:
   * the wait goes on past `neededMicros` until the balance covers that much, or every asked
   * lease has answered (settled, or trimmed to what its running calls reserved). `wanted.waitMs`
   * shortens the wait (recallWaitMs) for an asker with less time left. An asker the free balance
   * already covers asks for its waiting callers with `neededMicros` 0: then it waits until the
   * balance covers `wanted.micros` or the asked leases have answered. `wanted.skipSilent` leaves
   * out the leases that let an earlier ask run out unanswered (a dead process's, until they
   * expire): such an ask would wait its whole time for them on every opening.
   */
  async askBack(accountId: string, own: () => string[], freeMicros: number, neededMicros: number, wanted: { micros?: number; waitMs?: number; skipSilent?: boolean } = {}): Promise<AskedBack> {
    const wantedMicros = wanted.micros ?? neededMicros;
    // `own` is read again on each look: this process may open a lease of the account meanwhile
    // (an opening a video hold stopped waiting for), which is not another process's to ask.
    const others = await this.leases.othersOf(accountId, own());
    // The expired ones are a dead process's: nobody would give them back, so they are released
    // here and now rather than by the worker's sweeper up to half a minute later. Expiry is on
    // the store's clock, on which the holders wrote it.
    const now = await this.leases.clock.current();
    const dead = others.filter((lease) => lease.expires_at.getTime() <= now);
    // A lease left waiting for its hold (store/expired-leases.ts) is past its first expiry: its
    // process, if alive, settles it as soon as the hold lands. So one whose hold has landed is
    // released here, not left for the rest of its wait; one without is nothing to ask back.
    for (const lease of others) {
      if (lease.hold_awaited === true && lease.expires_at.getTime() > now && (await this.ledger.find(accountId, lease._id, 'hold'))) dead.push(lease);
    }
    // A live carrier's hold is all reserved by calls that run on: nothing to ask back.
    for (const [reference, expiresAt] of this.silent) if (expiresAt <= now) this.silent.delete(reference);
    const askable = (lease: (typeof others)[number], at: number) => lease.expires_at.getTime() > at && lease.carries_calls !== true && lease.hold_awaited !== true && !(wanted.skipSilent && this.silent.has(lease._id));
    const live = others.filter((lease) => askable(lease, now));
    for (const lease of dead) await releaseExpiredLease({ ledger: this.ledger, leases: this.leases }, lease);
    if (dead.length > 0) freeMicros = (await this.ledger.totals(accountId)).balance_micros;
    const leasedMicros = live.reduce((sum, lease) => sum + lease.amount_micros, 0);
    const targetMicros = Math.max(neededMicros, Math.min(wantedMicros, freeMicros + leasedMicros));
    // A caller the released money covers goes ahead; an ask only for waiting callers (needed
    // 0) goes on unless the balance covers them.
    if (freeMicros >= (neededMicros > 0 ? neededMicros : targetMicros)) return { asked: true, answered: true, unanswered: null };
    if (live.length === 0 || freeMicros + leasedMicros < neededMicros) return { asked: dead.length > 0, answered: false, unanswered: null };
    const references = live.map((lease) => lease._id);
    const seen = new Set(others.map((lease) => lease._id));
    const newcomers = new Set<string>();
    await this.leases.recall(references, new Date());
    // A process that died less than a lease expiry ago gives nothing back either: the wait is
    // bounded, and stops as soon as the money is there.
    const trimmed = new Set<string>();
    const deadline = Date.now() + Math.min(this.timing.recallWaitMs, wanted.waitMs ?? Infinity);
    while (Date.now() < deadline) {
      await sleep(WAIT_STEP_MS);
      const balanceMicros = (await this.ledger.totals(accountId)).balance_micros;
      if (balanceMicros >= targetMicros) return { asked: true, answered: true, unanswered: null };
      const current = await this.leases.othersOf(accountId, own());
      // The leases opened since the ask are asked too, once, while their owners have a look's
      // time left to answer. The owner of a lease all reserved by a running call renews it in
      // the background, from the free balance, and that renewal, begun before it saw the ask,
      // lands during the wait: left unasked, its idle money sat there while the caller got 403
      // (CI saw it). Once only: the other process's waiting callers open lease after lease, and
      // asking each would take every one away from them in turn.
      const opened = current.filter((lease) => !seen.has(lease._id) && askable(lease, this.leases.clock.now()));
      for (const lease of current) seen.add(lease._id);
      if (newcomers.size === 0 && opened.length > 0 && deadline - Date.now() >= this.timing.recallPollMs) {
        const ids = opened.map((lease) => lease._id);
        await this.leases.recall(ids, new Date());
        references.push(...ids);
        for (const id of ids) newcomers.add(id);
      }
      // Stopping at the first call's worth of balance left the asker's other waiting callers to
      // ask again, each time for one call's worth (and each ask spent one of their attempts).
      // An owner writes that it answered once it gave back what it could, which is nothing when
      // running calls reserve the lease whole (no trim then). Owners from before answer only
      // with the trim.
      const open = current.filter((lease) => references.includes(lease._id));
      const unanswered = open.filter((lease) => !answeredAsk(lease));
      if (open.length === 0 || (balanceMicros >= neededMicros && (await this.allTrimmed(accountId, unanswered, trimmed)))) return { asked: true, answered: true, unanswered: null };
    }
    // A lease that opened during the wait has a live owner, which may simply not have looked
    // yet: it is never reported as a process that stopped responding, nor skipped as silent.
    return { asked: true, answered: false, unanswered: await this.unansweredAmong(accountId, references, newcomers) };
  }

  /** Whether each of these open leases has given its unreserved rest back (a `trim`). `seen`
   * keeps those found trimmed between polls: a trim is for good. */
  private async allTrimmed(accountId: string, open: Array<{ _id: string }>, seen: Set<string>): Promise<boolean> {
    for (const lease of open) {
      if (seen.has(lease._id)) continue;
      if (!(await this.ledger.find(accountId, lease._id, 'trim'))) return false;
      seen.add(lease._id);
    }
    return true;
  }

  /** Those of the asked `references` still open with their whole hold, unanswered. A live
   * process trims or settles an asked lease within a poll or two (or says it has nothing to
   * give), so these belong to one that died or lost the store, and come back once they expire;
   * except the `newcomers`, opened during the wait, whose owners are alive and answer at their
   * next look. */
  private async unansweredAmong(accountId: string, references: string[], newcomers: Set<string>): Promise<UnansweredLeases | null> {
    let micros = 0;
    let pendingMicros = 0;
    let lastExpiry = 0;
    for (const lease of await this.leases.openAmong(references)) {
      if (answeredAsk(lease) || (await this.ledger.find(accountId, lease._id, 'trim'))) continue;
      micros += lease.amount_micros;
      if (newcomers.has(lease._id)) {
        pendingMicros += lease.amount_micros;
        continue;
      }
      this.silent.set(lease._id, lease.expires_at.getTime());
      lastExpiry = Math.max(lastExpiry, lease.expires_at.getTime());
    }
    if (micros === 0) return null;
    const retryAfterSeconds = micros === pendingMicros ? PENDING_RETRY_SECONDS : Math.max(1, Math.ceil((lastExpiry - this.leases.clock.now()) / 1000));
    return { micros, pendingMicros, retryAfterSeconds };
  }

  /** Tells the asker this process has given back what it could of a lease asked for at
   * `recalledAt`: its rest is trimmed, or running calls reserve all of it. */
  async answered(reference: string, recalledAt: Date): Promise<void> {
    await this.leases.answerRecall(reference, recalledAt);
  }

  /**
   * Which of this process's open leases `references` another process asked back. Looks at most
   * once per recallPollMs, or sharedRecallPollMs when `shared` (undefined when it did not look),
   * one look at a time.
   */
  async recalledAmong(references: string[], now: number, shared = false): Promise<RecallAsk[] | undefined> {
    if (this.polling || references.length === 0) return undefined;
    const pollMs = shared ? Math.min(this.timing.sharedRecallPollMs, this.timing.recallPollMs) : this.timing.recallPollMs;
    if (now < this.lastPollAt + pollMs - POLL_SLACK_MS) return undefined;
    this.polling = true;
    this.lastPollAt = now;
    try {
      const recalled = await this.leases.recalledAmong(references);
      return recalled.map((lease) => ({ reference: lease._id, recalledAt: lease.recalled_at!, answered: answeredAsk(lease) }));
    } finally {
      this.polling = false;
    }
  }
}
