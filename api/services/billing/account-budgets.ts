import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import { newId } from '../../../core/ids.ts';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { Ledger } from '../../../store/ledger.ts';
import type { UsageStore } from '../../../store/usage.ts';
import { balanceRefusal, formatUsd } from './insufficient-balance.ts';
import { JournalWriter } from './journal-writer.ts';
import { LeaseCarriers } from './lease-carriers.ts';
import { extendExpiringLeases, type LeaseExpiryOptions } from './lease-expiry.ts';
import { LeaseRecall, type UnansweredLeases } from './lease-recall.ts';
import { DEFAULT_LEASE_TIMING, SMALL_LEASE_SHARE, type LeaseTiming } from './lease-timing.ts';
import { RetiredLeases } from './retired-leases.ts';
import { SHARED_LEASE_CAP, SHARED_LEASE_SHARE, SharedAccounts } from './shared-accounts.ts';
import { SpendLease, type BilledCall, type Reservation } from './spend-lease.ts';

// Chat and image calls are paid from spend leases: per account, this process holds a slice of
// the balance on the ledger and reserves each call's worst case from it in memory. The ledger
// then sees one hold and one capture per lease instead of per call, and a call waits for the
// store only when its account has no lease that covers it (its first call, or a lease spent
// down faster than the background renewal).
//
// A lease is retired when its account goes idle or when it is old and has served calls (a fresh
// one is opened ahead of time so callers do not wait), and settles once its last call has
// finished (retired-leases.ts). If this process dies first, the lease is settled from its
// journal once its document expires (store/expired-leases.ts: by the worker's sweeper, or sooner
// by a caller that needs the money): the journal is written about once a second while calls are
// charged, so a crash can lose what the calls of the last second cost, never charge for
// anything twice. A live process never reserves from a lease within the last quarter of the
// expiry the store confirmed, so it does not spend money that may be on its way back.
//
// A caller the free balance cannot cover first asks other processes for the leases of its
// account they are not using (lease-recall.ts), so an idle lease elsewhere never causes a 403.
// A retired lease whose long call still runs hands that call to a carrier of just what it
// reserved, and settles for the calls that ended (lease-carriers.ts).
//
// A retired lease that calls still run on (a long stream, say) gives its unreserved rest back
// at once when a caller is short of money: this process's own (openNow) or another's
// (answerRecalls). Nobody waits for a long call to end, and busy leases cost no extra ledger
// entry otherwise.
//
// The balance is never overdrawn: a reservation only succeeds inside a hold the ledger granted,
// and the only excess (an upstream reporting more tokens than the worst-case estimate, or the
// calls of a lease released as expired before it settled) is debited with the ledger's own
// balance check.

const HOLD_ATTEMPTS = 3;
/** How many leases a waiting caller may see opened and taken by the other callers of its account
 * (waiting with it) before its 503, as long as recallWaitMs has not passed since it began to
 * wait; HOLD_ATTEMPTS at least, whatever the time. */
const LOST_LEASES_AT_MOST = 10;
/** How long a short caller waits for its own process's settlements of the account: they take a
 * few store writes, and one stuck in its retries' backoff after a store blip is not waited out. */
const OWN_SETTLEMENTS_WAIT_MS = 250;
/** How long a settlement that owes more than its hold waits for this process's other leases of
 * the account to give their money back. */
const MAKE_ROOM_WAIT_MS = 2_000;

export interface AccountBudgetsOptions {
  ledger: Ledger;
  leases: BudgetLeaseStore;
  usage: UsageStore;
  log: Pick<FastifyBaseLogger, 'warn' | 'error'>;
  timing?: Partial<LeaseTiming>;
}

/** Not opened: for want of balance, or (`raced`) every hold lost to other openings that took
 * part of the balance between its read and the hold. */
type Opening = { opened: true } | { opened: false; availableMicros: number; heldMicros: number; unanswered: UnansweredLeases | null; raced: boolean };

/** Waits for `work`, or until `deadline` (epoch ms), whichever comes first. */
async function untilDeadline(work: Promise<unknown>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))));
  await Promise.race([work, timeUp]);
  clearTimeout(timer);
}

export class AccountBudgets {
  private readonly timing: LeaseTiming;
  private readonly recall: LeaseRecall;
  private readonly active = new Map<string, SpendLease>();
  private readonly retired: RetiredLeases;
  private readonly openings = new Map<string, { mode: 'replace' | 'renew'; opening: Promise<Opening> }>();
  private readonly shared = new SharedAccounts();
  /** Per account, what each caller waiting for a lease of this process needs. */
  private readonly waiting = new Map<string, number[]>();
  private timer: NodeJS.Timeout | undefined;
  private readonly journals: JournalWriter;
  private readonly carriers: LeaseCarriers;
  private readonly expiry: LeaseExpiryOptions;

  constructor(private readonly options: AccountBudgetsOptions) {
    this.timing = { ...DEFAULT_LEASE_TIMING, ...options.timing };
    this.recall = new LeaseRecall(options.leases, options.ledger, this.timing);
    this.retired = new RetiredLeases(options, this.timing.settleRetryMaxMs, (accountId, settling) => this.makeRoom(accountId, settling));
    this.journals = new JournalWriter(options.leases.journal, this.timing.journalMs, options.log);
    this.carriers = new LeaseCarriers(options, this.retired, { afterMs: this.timing.maxAgeMs, expiryMs: this.timing.expiryMs });
    this.expiry = {
      leases: options.leases,
      expiryMs: this.timing.expiryMs,
      log: options.log,
      lost: (lease) => {
        if (this.active.get(lease.accountId) === lease) this.retire(lease);
      },
    };
  }

  /**
   * Reserves `amountMicros` for one call of `accountId`; 403 insufficient_balance when the
   * balance cannot cover it. `hint` ends the refusal's message (what the caller can change).
   */
  reserve(accountId: string, amountMicros: number, call: BilledCall, hint: string): Reservation | Promise<Reservation> {
    // Synchronous when the account's lease has room, as it has for almost every call: then
    // no promise is made at all.
    return this.reserveFromLease(accountId, amountMicros, call) ?? this.reserveAfterOpening(accountId, amountMicros, call, hint);
  }

  private reserveFromLease(accountId: string, amountMicros: number, call: BilledCall): Reservation | undefined {
    this.startTicking();
    const lease = this.active.get(accountId);
    if (!lease?.canCover(amountMicros)) return undefined;
    if (lease.expiresAt - this.options.leases.clock.now() < this.timing.expiryMs / 4) {
      // Its expiry could not be pushed forward (the store is out of reach): soon the sweeper may
      // hand its hold back. Calls wait for a new lease, or get 503 while the store stays away.
      this.retire(lease);
      return undefined;
    }
    const reservation = lease.reserve(amountMicros, call, Date.now());
    if (lease.availableMicros < lease.amountMicros / 4) this.renewInBackground(lease);
    return reservation;
  }

  private async reserveAfterOpening(accountId: string, amountMicros: number, call: BilledCall, hint: string): Promise<Reservation> {
    // Counted until it reserved or was refused: a lease opened meanwhile covers every caller
    // waiting for it, not only the one that opened it (leaseSize).
    const needs = this.waiting.get(accountId) ?? [];
    needs.push(amountMicros);
    this.waiting.set(accountId, needs);
    try {
      return await this.reserveWhileWaiting(accountId, amountMicros, call, hint);
    } finally {
      needs.splice(needs.indexOf(amountMicros), 1);
      if (needs.length === 0) this.waiting.delete(accountId);
    }
  }

  private async reserveWhileWaiting(accountId: string, amountMicros: number, call: BilledCall, hint: string): Promise<Reservation> {
    // Each opening that opened found the free balance covering at least this call; when its
    // lease went to the other waiting callers, the money of calls that ended is often on its way
    // back (leases settling, trims), so the caller tries again for a while rather than a 503.
    // Within recallWaitMs, up to LOST_LEASES_AT_MOST openings; HOLD_ATTEMPTS at least, within
    // twice that. An opening bounds its own wait the same way (openNow).
    const started = Date.now();
    const mayTry = (attempt: number) => {
      const elapsed = Date.now() - started;
      return attempt === 0 || (attempt < LOST_LEASES_AT_MOST && elapsed < this.timing.recallWaitMs) || (attempt < HOLD_ATTEMPTS && elapsed < 2 * this.timing.recallWaitMs);
    };
    for (let attempt = 0; mayTry(attempt); attempt++) {
      const opening = await this.open(accountId, amountMicros, 'replace');
      // Other openings took the money between its reads and its holds: not a shortage, the
      // caller tries again like one whose lease the other waiting callers took. So does one
      // that joined an opening for a caller the account cannot afford, when the balance that
      // opening read covers this one.
      if (!opening.opened && (opening.raced || amountMicros <= opening.availableMicros)) continue;
      if (!opening.opened) {
        throw balanceRefusal(amountMicros, `this request may cost up to ${formatUsd(amountMicros)}`, opening, `Add credits, ${hint}, and retry.`);
      }
      const reservation = this.reserveFromLease(accountId, amountMicros, call);
      if (reservation) return reservation;
    }
    // Other calls of the account took every new lease before this one could reserve.
    // Money of calls ending comes back within a second or so: a client told when retries then.
    throw new GatewayError('service_unavailable', 'Too many concurrent calls on this account to reserve their cost; nothing was charged. Retry after 1 s.', undefined, { 'retry-after': '1' });
  }

  /** Gives the account's unreserved leased money back to the balance, as far as it can now:
   * this process's, then, if the free balance still falls short of `neededMicros`, other
   * processes' (a video submission refused for want of balance asks for this before it gives up).
   * Resolves with what the other processes' leases that did not answer still hold, if any. */
  async returnUnused(accountId: string, neededMicros: number): Promise<UnansweredLeases | null> {
    const lease = this.active.get(accountId);
    if (lease) this.retire(lease);
    await this.retired.trimAll(accountId);
    await Promise.all(this.retired.settlementsUnderWay(accountId));
    const freeMicros = (await this.options.ledger.totals(accountId)).balance_micros;
    if (freeMicros >= neededMicros) return null;
    return (await this.recall.askBack(accountId, this.referencesOf(accountId), freeMicros, neededMicros)).unanswered;
  }

  /** Trims this process's retired leases of `accountId` that calls still run on, and settles
   * those whose calls have all ended; when `short` (the caller itself lacks money), waits a
   * little for those settlements. True when some money may have gone back to the balance. */
  private async returnOwnRests(accountId: string, short: boolean): Promise<boolean> {
    for (const lease of this.retired.all()) if (lease.accountId === accountId && lease.isDrained) this.retired.settle(lease);
    const settling = this.retired.settlementsUnderWay(accountId);
    const trimmed = await this.retired.trimAll(accountId);
    if (short) await untilDeadline(Promise.allSettled(settling), Date.now() + OWN_SETTLEMENTS_WAIT_MS);
    return trimmed || settling.length > 0;
  }

  /** Before `settling` is debited beyond its hold: gives back what this process holds of the
   * account elsewhere. The open lease is retired (settled at once when idle, else its
   * unreserved rest trimmed), as are the rests of retired leases calls still run on. Waits a
   * little for those settlements, never for this one's (two settlements waiting for each other
   * would never end). */
  private async makeRoom(accountId: string, settling: SpendLease): Promise<void> {
    const lease = this.active.get(accountId);
    if (lease) this.retire(lease);
    await this.retired.trimAll(accountId);
    const others = [...this.retired.all()].filter((other) => other !== settling && other.accountId === accountId).map((other) => this.retired.settlementOf(other));
    await untilDeadline(Promise.allSettled(others), Date.now() + MAKE_ROOM_WAIT_MS);
  }

  /** Retires every lease, waits for running calls, settles everything: all within `timeoutMs`.
   * A shutdown must not hang on an unreachable store (settling retries for seconds); a lease
   * left open is released by the worker's sweeper when it expires. */
  async close(timeoutMs = 10_000): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const deadline = Date.now() + timeoutMs;
    await untilDeadline(Promise.allSettled([...this.openings.values()].map(({ opening }) => opening)), deadline);
    for (const lease of this.active.values()) this.retire(lease);
    while (this.retired.all().some((lease) => !lease.isDrained) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const lease of this.retired.all()) if (lease.isDrained) this.retired.settle(lease);
    await untilDeadline(Promise.allSettled(this.retired.settlementsUnderWay()), deadline);
    this.retired.stopRetrying();
    for (const lease of this.retired.all()) {
      const why = lease.isDrained ? 'its settlement did not finish in time' : `${lease.callsInFlight} calls still running on it`;
      this.options.log.error({ lease: lease.reference, callsInFlight: lease.callsInFlight }, `closing with a lease unsettled (${why}); the sweeper will release its hold`);
    }
  }

  /** Opens a lease; 'replace' retires the current one first, 'renew' only once the new one holds. */
  private open(accountId: string, neededMicros: number, mode: 'replace' | 'renew'): Promise<Opening> {
    const underWay = this.openings.get(accountId);
    if (underWay) {
      // A renewal neither trims nor asks other processes back: a caller it could not serve
      // tries a replacement of its own once it is over, rather than a 403 the account's money
      // would have covered.
      if (mode === 'replace' && underWay.mode === 'renew') return underWay.opening.then((opening) => (opening.opened ? opening : this.open(accountId, neededMicros, 'replace')));
      return underWay.opening;
    }
    const opening = this.openNow(accountId, neededMicros, mode).finally(() => this.openings.delete(accountId));
    this.openings.set(accountId, { mode, opening });
    return opening;
  }

  private async openNow(accountId: string, neededMicros: number, mode: 'replace' | 'renew'): Promise<Opening> {
    const { ledger, leases } = this.options;
    const deadline = Date.now() + 2 * this.timing.recallWaitMs;
    const current = this.active.get(accountId);
    if (mode === 'replace') {
      // Nothing can make up a call that costs more than all the account's money, free and held
      // (leases, this process's among them, and video tasks): refused at once, and the current
      // lease, which other callers are using, stays.
      const totals = await ledger.totals(accountId);
      if (totals.balance_micros + totals.held_micros < neededMicros) {
        return { opened: false, availableMicros: totals.balance_micros, heldMicros: totals.held_micros, unanswered: null, raced: false };
      }
    }
    if (current && mode === 'replace') {
      // Settled at once when idle, so its unreserved rest is part of the balance read below.
      this.retire(current);
      await this.retired.settlementOf(current);
    }
    let availableMicros = 0;
    let heldMicros = 0;
    let trimmedOwn = false;
    let askedBack = false;
    let asks = 0;
    let answered = false;
    let unanswered: UnansweredLeases | null = null;
    // Attempts count holds lost to a race; trimming happens once. Asking back happens again (at
    // most HOLD_ATTEMPTS asks) when the asked leases answered but the money was gone before the
    // hold: the other process's waiting callers took it into a new lease, which is asked next.
    let attempt = 0;
    while (attempt < HOLD_ATTEMPTS) {
      ({ balance_micros: availableMicros, held_micros: heldMicros } = await ledger.totals(accountId));
      // A caller is waiting ('replace'), maybe with others of this process: this process's own
      // money of the account goes back first when the free balance falls short of them all:
      // the unreserved rests of leases that calls still run on (each may be too small for a
      // call of its own), and retired leases whose calls have all ended (they settle on the
      // next tick otherwise: asked back, or refused, in between).
      if (mode === 'replace' && !trimmedOwn && availableMicros < this.waitingFor(accountId, neededMicros, availableMicros + heldMicros)) {
        trimmedOwn = true;
        if (await this.returnOwnRests(accountId, availableMicros < neededMicros)) continue;
      }
      if (availableMicros < neededMicros) {
        // A caller is waiting ('replace'): other processes' leases may make up the rest (this
        // process's own rests were trimmed above).
        if (mode === 'renew') break;
        // The other processes look for asks every recallPollMs: one with less time left than
        // that would read as a process that stopped answering.
        const leftMs = deadline - Date.now();
        if (asks === HOLD_ATTEMPTS || (askedBack && !answered) || leftMs < this.timing.recallPollMs) break;
        asks++;
        const wanted = { micros: this.waitingFor(accountId, neededMicros, availableMicros + heldMicros), waitMs: leftMs };
        ({ asked: askedBack, answered, unanswered } = await this.recall.askBack(accountId, this.referencesOf(accountId), availableMicros, neededMicros, wanted));
        if (!askedBack) break;
        this.shared.mark(accountId);
        continue;
      }
      const amountMicros = this.leaseSize(accountId, availableMicros, neededMicros);
      const reference = newId('lease');
      const now = Date.now();
      const expiresAt = (await leases.clock.current()) + this.timing.expiryMs;
      // The document first: a hold never exists without the record the sweeper looks for.
      await leases.open({ _id: reference, account_id: accountId, amount_micros: amountMicros, opened_at: new Date(now), expires_at: new Date(expiresAt) });
      const outcome = await ledger.apply({ accountId, keyId: null, reference, operation: 'hold', amountMicros });
      if (outcome !== 'applied') {
        // Another process took part of the balance between the read and the hold.
        await leases.remove(reference);
        attempt++;
        continue;
      }
      const previous = this.active.get(accountId);
      const idleMs = amountMicros <= availableMicros * SMALL_LEASE_SHARE ? this.timing.smallLeaseIdleMs : this.timing.idleMs;
      this.active.set(accountId, new SpendLease(reference, accountId, amountMicros, now, expiresAt, idleMs));
      if (previous) this.retire(previous);
      return { opened: true };
    }
    return { opened: false, availableMicros, heldMicros, unanswered, raced: attempt === HOLD_ATTEMPTS };
  }

  /** What a new lease of the account holds: 8 worst-case calls of the one that opens it (or
   * what all of this process's callers waiting for it need, when more), at least $1, at most the
   * free balance. When another process serves the account too (one of its leases was asked back
   * lately, shared-accounts.ts), not the whole of a small balance: at least a quarter of the free
   * balance rather than $1, and at most half of it, never less than the waiting callers need. */
  private leaseSize(accountId: string, availableMicros: number, neededMicros: number): number {
    const waitingMicros = this.waitingFor(accountId, neededMicros, availableMicros);
    const wanted = Math.max(neededMicros * this.timing.reservationsPerLease, waitingMicros);
    if (!this.shared.has(accountId)) return Math.min(availableMicros, Math.max(wanted, this.timing.minLeaseMicros));
    const floorMicros = Math.min(this.timing.minLeaseMicros, Math.floor(availableMicros * SHARED_LEASE_SHARE));
    const capMicros = Math.max(waitingMicros, Math.floor(availableMicros * SHARED_LEASE_CAP));
    return Math.min(availableMicros, capMicros, Math.max(wanted, floorMicros));
  }

  /** What the callers of `accountId` waiting for a lease of this process need together (at
   * least `neededMicros`, that of the one opening it), counting only those whose need is within
   * `boundMicros`: a caller the account cannot serve must not size leases or prolong waits. */
  private waitingFor(accountId: string, neededMicros: number, boundMicros: number): number {
    let total = 0;
    for (const need of this.waiting.get(accountId) ?? []) if (need <= boundMicros) total += need;
    return Math.max(neededMicros, total);
  }

  /** This process's leases of `accountId`, open or settling (carriers being opened too). */
  private referencesOf(accountId: string): string[] {
    return [...this.active.values(), ...this.retired.all(), ...this.carriers.underWay()].filter((lease) => lease.accountId === accountId).map((lease) => lease.reference);
  }

  private renewInBackground(lease: SpendLease): void {
    if (this.openings.has(lease.accountId)) return;
    this.open(lease.accountId, lease.largestReservationMicros, 'renew').catch((error: unknown) => {
      this.options.log.warn({ ...failureFields(error), account: lease.accountId }, 'renewing a spend lease failed; the current one stays in use');
    });
  }

  private retire(lease: SpendLease): void {
    lease.close();
    if (this.active.get(lease.accountId) === lease) this.active.delete(lease.accountId);
    this.retired.add(lease);
  }

  private startTicking(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(Date.now()), this.timing.tickMs);
    this.timer.unref();
  }

  private tick(now: number): void {
    for (const lease of this.active.values()) {
      if (lease.callsInFlight === 0 && now - lease.lastActivityAt >= lease.idleMs) this.retire(lease);
      // A lease no call used has nothing for the ledger or the usage records yet: it stays.
      else if (now - lease.openedAt >= this.timing.maxAgeMs && lease.hasServedCalls) this.renewInBackground(lease);
    }
    this.carriers.tick(now);
    const leases = [...this.active.values(), ...this.retired.all()];
    for (const lease of leases) if (lease.isDrained) this.retired.settle(lease);
    extendExpiringLeases(leases, this.options.leases.clock.now(), this.expiry);
    this.answerRecalls(now);
    this.journals.tick(now, leases);
    this.shared.prune(now);
  }

  /** Retires the open leases another process asked back (lease-recall.ts), and trims those
   * that calls still run on, retired before or just now. */
  private answerRecalls(now: number): void {
    const untrimmed = this.retired.all().filter((lease) => !lease.isDrained && lease.trimmedMicros === 0);
    const candidates = [...this.active.values(), ...untrimmed];
    this.recall.recalledAmong(candidates.map((lease) => lease.reference), now).then(
      (recalled) => {
        for (const lease of candidates) {
          if (!recalled?.includes(lease.reference)) continue;
          this.shared.mark(lease.accountId);
          if (this.active.get(lease.accountId) === lease) this.retire(lease);
          if (!lease.isDrained) void this.retired.trimRest(lease);
        }
      },
      (error: unknown) => this.options.log.warn(failureFields(error), 'looking for recalled spend leases failed; will look again'),
    );
  }
}
