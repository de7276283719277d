import { newId } from '../../../core/ids.ts';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { Ledger } from '../../../store/ledger.ts';
import type { LeaseRecall, UnansweredLeases } from './lease-recall.ts';
import { leaseSize } from './lease-size.ts';
import { SMALL_LEASE_SHARE, type LeaseTiming } from './lease-timing.ts';
import type { RetiredLeases } from './retired-leases.ts';
import type { SharedAccounts } from './shared-accounts.ts';
import { SpendLease } from './spend-lease.ts';
import { untilDeadline } from './until-deadline.ts';
import type { WaitingCallers } from './waiting-callers.ts';

// Opening a spend lease of an account (account-budgets.ts): one opening at a time per account,
// which every caller that finds the lease short waits for. A replacement ('replace', for a
// caller waiting) first returns this process's own unused money of the account, then asks other
// processes for theirs (lease-recall.ts), and refuses at once what all the account's money could
// not cover; a renewal ('renew', ahead of need in the background) only opens from the free
// balance. Holds race other processes' on the ledger, which settles them.

/** Holds lost to a race, and asks of other processes, per opening. */
export const HOLD_ATTEMPTS = 3;
/** How long a short caller waits for its own process's settlements of the account: they take a
 * few store writes, and one stuck in its retries' backoff after a store blip is not waited out. */
const OWN_SETTLEMENTS_WAIT_MS = 250;

/** Not opened: for want of balance, or (`raced`) every hold lost to other openings that took
 * part of the balance between its read and the hold. */
/** Not opened: what the balance was, and why. `beyondAll`: the call costs more than all the
 * account's money, free and held, so nothing given back could have covered it. */
export type Opening = { opened: true } | { opened: false; availableMicros: number; heldMicros: number; unanswered: UnansweredLeases | null; raced: boolean; beyondAll: boolean };

/** What an opening works with: the budgets' stores and leases. */
export interface OpeningHost {
  ledger: Ledger;
  leases: BudgetLeaseStore;
  timing: LeaseTiming;
  retired: RetiredLeases;
  recall: LeaseRecall;
  shared: SharedAccounts;
  waiting: WaitingCallers;
  /** The account's open lease, if any. */
  current(accountId: string): SpendLease | undefined;
  /** Makes `lease` its account's open lease, retiring the one before. */
  install(lease: SpendLease): void;
  retire(lease: SpendLease): void;
  /** This process's leases of the account, open or settling. */
  referencesOf(accountId: string): string[];
  /** A direct take of the account's money under way (direct-takes.ts): openings wait for it. */
  takeUnderWay(accountId: string): Promise<unknown> | undefined;
}

export class LeaseOpenings {
  private readonly underWay = new Map<string, { mode: 'replace' | 'renew'; opening: Promise<Opening> }>();
  /** The lease each opening is writing (its document, then its hold), before it is installed:
   * already in the store, it is this process's, which an ask of the same account (a video hold
   * giving leases back) must not take for another process's. */
  private readonly beingWritten = new Map<string, string>();

  constructor(private readonly host: OpeningHost) {}

  has(accountId: string): boolean {
    return this.underWay.has(accountId);
  }

  /** The account's opening under way, if any. */
  of(accountId: string): Promise<Opening> | undefined {
    return this.underWay.get(accountId)?.opening;
  }

  /** The lease an opening of the account is writing, if any. */
  writing(accountId: string): string | undefined {
    return this.beingWritten.get(accountId);
  }

  /** Every opening under way, to wait for at a close. */
  all(): Promise<Opening>[] {
    return [...this.underWay.values()].map(({ opening }) => opening);
  }

  /** Opens a lease; 'replace' retires the current one first, 'renew' only once the new one holds. */
  open(accountId: string, neededMicros: number, mode: 'replace' | 'renew'): Promise<Opening> {
    const underWay = this.underWay.get(accountId);
    if (underWay) {
      // A renewal neither trims nor asks other processes back: a caller it could not serve
      // tries a replacement of its own once it is over, rather than a 403 the account's money
      // would have covered.
      if (mode === 'replace' && underWay.mode === 'renew') return underWay.opening.then((opening) => (opening.opened ? opening : this.open(accountId, neededMicros, 'replace')));
      return underWay.opening;
    }
    const opening = this.openNow(accountId, neededMicros, mode).finally(() => this.underWay.delete(accountId));
    this.underWay.set(accountId, { mode, opening });
    return opening;
  }

  private async openNow(accountId: string, neededMicros: number, mode: 'replace' | 'renew'): Promise<Opening> {
    const { ledger, leases, timing } = this.host;
    // A video hold or a deduction giving leases back takes what they return before a new lease
    // does (a dozen store round trips; bounded, as a store in trouble could hold it up).
    const take = this.host.takeUnderWay(accountId);
    if (take) await untilDeadline(take.catch(() => undefined), Date.now() + 2 * timing.recallWaitMs);
    const deadline = Date.now() + 2 * timing.recallWaitMs;
    const current = this.host.current(accountId);
    if (mode === 'replace') {
      // Nothing can make up a call that costs more than all the account's money, free and held
      // (leases, this process's among them, and video tasks): refused at once, and the current
      // lease, which other callers are using, stays.
      const totals = await ledger.totals(accountId);
      if (totals.balance_micros + totals.held_micros < neededMicros) {
        return { opened: false, availableMicros: totals.balance_micros, heldMicros: totals.held_micros, unanswered: null, raced: false, beyondAll: true };
      }
    }
    if (current && mode === 'replace') {
      // Settled at once when idle, so its unreserved rest is part of the balance read below.
      this.host.retire(current);
      await this.host.retired.settlementOf(current);
    }
    let availableMicros = 0;
    let heldMicros = 0;
    let trimmedOwn = false;
    let askedBack = false;
    let askedForWaiting = false;
    let asks = 0;
    let answered = false;
    let unanswered: UnansweredLeases | null = null;
    // Attempts count holds lost to a race; trimming happens once, and so does asking back for
    // the callers waiting with this one. Asking back for this caller happens again (at most
    // HOLD_ATTEMPTS asks) when the asked leases answered but the money was gone before the
    // hold: the other process's waiting callers took it into a new lease, which is asked next.
    let attempt = 0;
    while (attempt < HOLD_ATTEMPTS) {
      ({ balance_micros: availableMicros, held_micros: heldMicros } = await ledger.totals(accountId));
      // A caller is waiting ('replace'), maybe with others of this process: this process's own
      // money of the account goes back first when the free balance falls short of them all:
      // the unreserved rests of leases that calls still run on (each may be too small for a
      // call of its own), and retired leases whose calls have all ended (they settle on the
      // next tick otherwise: asked back, or refused, in between).
      const waitingMicros = this.host.waiting.need(accountId, neededMicros, availableMicros + heldMicros);
      if (mode === 'replace' && !trimmedOwn && availableMicros < waitingMicros) {
        trimmedOwn = true;
        if (await this.returnOwnRests(accountId, availableMicros < neededMicros)) continue;
      }
      // The free balance covers this caller but not the others waiting with it, one of which
      // already saw a lease go to the others, on an account another process serves too: that
      // process's leases are asked back once, before opening. Else each opening took the little
      // that came free (one call's worth, from a settled lease) and served one waiting caller,
      // while the other process's lease, sized for its own waiting callers a moment before, sat
      // on the rest; the others lost opening after opening, and got 503 after three (CI saw 2
      // of 192 affordable calls refused so). Asking before any caller lost an opening made
      // every call of such an account slower (a review: median 40 ms to 0.8 s, with the store
      // 15 ms away). This caller needs nothing more (0): the wait ends once the asked leases
      // have answered.
      if (mode === 'replace' && !askedForWaiting && availableMicros >= neededMicros && availableMicros < waitingMicros && this.host.shared.has(accountId) && this.host.waiting.anyLostOpening(accountId) && deadline - Date.now() >= timing.recallPollMs) {
        askedForWaiting = true;
        const wanted = { micros: waitingMicros, waitMs: deadline - Date.now(), skipSilent: true };
        if ((await this.host.recall.askBack(accountId, () => this.host.referencesOf(accountId), availableMicros, 0, wanted)).asked) continue;
      }
      if (availableMicros < neededMicros) {
        // A caller is waiting ('replace'): other processes' leases may make up the rest (this
        // process's own rests were trimmed above).
        if (mode === 'renew') break;
        // The other processes look for asks every recallPollMs: one with less time left than
        // that would read as a process that stopped answering.
        const leftMs = deadline - Date.now();
        if (asks === HOLD_ATTEMPTS || (askedBack && !answered) || leftMs < timing.recallPollMs) break;
        asks++;
        const wanted = { micros: waitingMicros, waitMs: leftMs };
        ({ asked: askedBack, answered, unanswered } = await this.host.recall.askBack(accountId, () => this.host.referencesOf(accountId), availableMicros, neededMicros, wanted));
        if (!askedBack) break;
        this.host.shared.mark(accountId);
        continue;
      }
      const amountMicros = leaseSize({
        availableMicros,
        neededMicros,
        waitingMicros: this.host.waiting.need(accountId, neededMicros, availableMicros),
        shared: this.host.shared.has(accountId),
        reservationsPerLease: timing.reservationsPerLease,
        minLeaseMicros: timing.minLeaseMicros,
      });
      const reference = newId('lease');
      const now = Date.now();
      const expiresAt = (await leases.clock.current()) + timing.expiryMs;
      this.beingWritten.set(accountId, reference);
      try {
        // The document first: a hold never exists without the record the sweeper looks for.
        await leases.open({ _id: reference, account_id: accountId, amount_micros: amountMicros, opened_at: new Date(now), expires_at: new Date(expiresAt) });
        const outcome = await ledger.apply({ accountId, keyId: null, reference, operation: 'hold', amountMicros });
        if (outcome !== 'applied') {
          // Another process took part of the balance between the read and the hold.
          await leases.remove(reference);
          attempt++;
          continue;
        }
        const idleMs = amountMicros <= availableMicros * SMALL_LEASE_SHARE ? timing.smallLeaseIdleMs : timing.idleMs;
        this.host.install(new SpendLease(reference, accountId, amountMicros, now, expiresAt, idleMs));
        return { opened: true };
      } finally {
        this.beingWritten.delete(accountId);
      }
    }
    return { opened: false, availableMicros, heldMicros, unanswered, raced: attempt === HOLD_ATTEMPTS, beyondAll: false };
  }

  /** Trims this process's retired leases of `accountId` that calls still run on, and settles
   * those whose calls have all ended; when `short` (the caller itself lacks money), waits a
   * little for those settlements. True when some money may have gone back to the balance. */
  private async returnOwnRests(accountId: string, short: boolean): Promise<boolean> {
    for (const lease of this.host.retired.all()) if (lease.accountId === accountId && lease.isDrained) this.host.retired.settle(lease);
    const settling = this.host.retired.settlementsUnderWay(accountId);
    const trimmed = await this.host.retired.trimAll(accountId);
    if (short) await untilDeadline(Promise.allSettled(settling), Date.now() + OWN_SETTLEMENTS_WAIT_MS);
    return trimmed || settling.length > 0;
  }
}
