import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { Ledger } from '../../../store/ledger.ts';
import type { UsageStore } from '../../../store/usage.ts';
import { DirectTakes } from './direct-takes.ts';
import { balanceRefusal, formatUsd } from './insufficient-balance.ts';
import { JournalWriter } from './journal-writer.ts';
import { LeaseCarriers } from './lease-carriers.ts';
import { extendExpiringLeases, type LeaseExpiryOptions } from './lease-expiry.ts';
import { HOLD_ATTEMPTS, LeaseOpenings } from './lease-openings.ts';
import { LeaseRecall, type UnansweredLeases } from './lease-recall.ts';
import { answerRecalls, type RecallAnswerHost } from './recall-answers.ts';
import { DEFAULT_LEASE_TIMING, type LeaseTiming } from './lease-timing.ts';
import { RetiredLeases } from './retired-leases.ts';
import { SharedAccounts } from './shared-accounts.ts';
import type { BilledCall, Reservation, SpendLease } from './spend-lease.ts';
import { untilDeadline } from './until-deadline.ts';
import { WaitingCallers, type WaitingCaller } from './waiting-callers.ts';

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
// On an account two processes share, so does an opening the free balance covers when it does
// not cover the callers waiting with it and one of them saw a lease go to the others
// (lease-openings.ts).
// A retired lease whose long call still runs hands that call to a carrier of just what it
// reserved, and settles for the calls that ended (lease-carriers.ts).
//
// A retired lease that calls still run on (a long stream, say) gives its unreserved rest back
// at once when a caller is short of money: this process's own (lease-openings.ts) or another's
// (answerRecalls). Nobody waits for a long call to end, and busy leases cost no extra ledger
// entry otherwise.
//
// The balance is never overdrawn: a reservation only succeeds inside a hold the ledger granted,
// and the only excess (an upstream reporting more tokens than the worst-case estimate, or the
// calls of a lease released as expired before it settled) is debited with the ledger's own
// balance check.

/** How many leases a waiting caller may see opened and taken by the other callers of its account
 * (waiting with it) before its 503, as long as recallWaitMs has not passed since it began to
 * wait; HOLD_ATTEMPTS at least, whatever the time. */
const LOST_LEASES_AT_MOST = 10;
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

export class AccountBudgets {
  private readonly timing: LeaseTiming;
  private readonly recall: LeaseRecall;
  private readonly active = new Map<string, SpendLease>();
  private readonly retired: RetiredLeases;
  private readonly openings: LeaseOpenings;
  private readonly shared = new SharedAccounts();
  private readonly waiting = new WaitingCallers();
  private readonly takes = new DirectTakes();
  private timer: NodeJS.Timeout | undefined;
  private readonly journals: JournalWriter;
  private readonly carriers: LeaseCarriers;
  private readonly expiry: LeaseExpiryOptions;
  private readonly recallAnswers: RecallAnswerHost;

  constructor(private readonly options: AccountBudgetsOptions) {
    this.timing = { ...DEFAULT_LEASE_TIMING, ...options.timing };
    this.recall = new LeaseRecall(options.leases, options.ledger, this.timing);
    this.journals = new JournalWriter(options.leases.journal, this.timing.journalMs, options.log);
    this.retired = new RetiredLeases({ ...options, journals: this.journals }, this.timing.settleRetryMaxMs, (accountId, settling) => this.makeRoom(accountId, settling));
    this.carriers = new LeaseCarriers(options, this.retired, { afterMs: this.timing.maxAgeMs, expiryMs: this.timing.expiryMs });
    this.openings = new LeaseOpenings({
      ledger: options.ledger,
      leases: options.leases,
      timing: this.timing,
      retired: this.retired,
      recall: this.recall,
      shared: this.shared,
      waiting: this.waiting,
      current: (accountId) => this.active.get(accountId),
      install: (lease) => {
        const previous = this.active.get(lease.accountId);
        this.active.set(lease.accountId, lease);
        if (previous) this.retire(previous);
      },
      retire: (lease) => this.retire(lease),
      referencesOf: (accountId) => this.referencesOf(accountId),
      takeUnderWay: (accountId) => this.takes.of(accountId),
    });
    this.recallAnswers = { recall: this.recall, retired: this.retired, shared: this.shared, log: options.log, active: this.active, retire: (lease) => this.retire(lease) };
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
    // waiting for it, not only the one that opened it (lease-size.ts).
    const waiter = this.waiting.join(accountId, amountMicros);
    try {
      return await this.reserveWhileWaiting(accountId, amountMicros, call, hint, waiter);
    } finally {
      waiter.leave();
    }
  }

  private async reserveWhileWaiting(accountId: string, amountMicros: number, call: BilledCall, hint: string, waiter: WaitingCaller): Promise<Reservation> {
    // Each opening that opened found the free balance covering at least this call; when its
    // lease went to the other waiting callers, the money of calls that ended is often on its way
    // back (leases settling, trims), so the caller tries again for a while rather than a 503.
    // Within recallWaitMs, up to LOST_LEASES_AT_MOST openings; HOLD_ATTEMPTS at least, within
    // twice that. An opening bounds its own wait the same way (lease-openings.ts).
    const started = Date.now();
    const mayTry = (attempt: number) => {
      const elapsed = Date.now() - started;
      return attempt === 0 || (attempt < LOST_LEASES_AT_MOST && elapsed < this.timing.recallWaitMs) || (attempt < HOLD_ATTEMPTS && elapsed < 2 * this.timing.recallWaitMs);
    };
    for (let attempt = 0; mayTry(attempt); attempt++) {
      const opening = await this.openings.open(accountId, amountMicros, 'replace');
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
      waiter.lostOpening();
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
    return (await this.recall.askBack(accountId, () => this.referencesOf(accountId), freeMicros, neededMicros)).unanswered;
  }

  /** Takes money from the account directly (`take`: a video task's hold, a deduction) once its
   * unreserved leased money is back, with no lease of this process opened in between
   * (direct-takes.ts). With what other processes' leases that did not answer still hold.
   * `stillWanted`, asked after the waits: false skips asking leases back (retiring this
   * process's, asking others'), for a caller answered meanwhile; `take` then decides. */
  async takeWithLeasesBack<Result>(accountId: string, neededMicros: number, take: () => Promise<Result>, stillWanted: () => boolean = () => true): Promise<{ result: Result; unanswered: UnansweredLeases | null }> {
    return this.takes.run(accountId, async () => {
      // An opening already under way would lease what comes back: it goes first.
      const opening = this.openings.of(accountId);
      if (opening) await untilDeadline(opening.catch(() => undefined), Date.now() + this.timing.recallWaitMs);
      const unanswered = stillWanted() ? await this.returnUnused(accountId, neededMicros) : null;
      return { result: await take(), unanswered };
    });
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
    await untilDeadline(Promise.allSettled(this.openings.all()), deadline);
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

  /** This process's leases of `accountId`, open or settling (carriers being opened too). */
  private referencesOf(accountId: string): string[] {
    const references = [...this.active.values(), ...this.retired.all(), ...this.carriers.underWay()].filter((lease) => lease.accountId === accountId).map((lease) => lease.reference);
    const writing = this.openings.writing(accountId);
    return writing === undefined ? references : [...references, writing];
  }

  private renewInBackground(lease: SpendLease): void {
    if (this.openings.has(lease.accountId)) return;
    this.openings.open(lease.accountId, lease.largestReservationMicros, 'renew').catch((error: unknown) => {
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
    answerRecalls(this.recallAnswers, now);
    this.journals.tick(now, leases);
    this.shared.prune(now);
  }
}
