import type { UsageRecord } from '../../../store/usage.ts';

// One ledger hold that an API process spends from locally. Chat and image calls reserve their
// worst case from the lease in memory and settle their real price into it, so the hot path does
// no store round trip; the lease later settles with the ledger once for all of them (see
// account-budgets.ts). Every call's reservation fits inside the hold, so the local arithmetic
// can never spend money the ledger did not set aside.

export interface UsageFigures {
  inputTokens?: number;
  outputTokens?: number;
  images?: number;
}

export interface BilledCall {
  keyId: string;
  modelId: string;
  kind: 'chat' | 'image';
}

interface UsageTally {
  call: BilledCall;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  images: number;
  spend_micros: number;
}

/** What a settled lease owes the ledger and the usage records. */
export interface LeaseStatement {
  /** Everything its calls cost; above the hold when calls allowed overage. */
  spentMicros: number;
  usage: Array<Omit<UsageRecord, 'day' | 'created_at'> & { at: Date }>;
}

export class SpendLease {
  private reservedMicros = 0;
  /** The reservations not settled yet: the calls in flight, which moveRunningCallsTo() can hand
   * to another lease. */
  private readonly running = new Set<Reservation>();
  /** When close() was called (epoch ms). */
  closedAt: number | undefined;
  private spentMicros = 0;
  private closed = false;
  private trimmed = 0;
  private readonly usage = new Map<string, UsageTally>();
  lastActivityAt: number;
  /** The biggest single reservation so far: what the next lease must at least cover. */
  largestReservationMicros = 0;
  /** When the sweeper may release the hold, on the store's clock (store/store-clock.ts), as the
   * store last confirmed it; pushed forward while the lease lives. */
  expiresAt: number;
  /** An extension of expiresAt is on its way to the store. */
  extending = false;
  /** Counts the charges settled into it; the journal (store/lease-journal.ts) was last written
   * as of `journaledCharges`. */
  charges = 0;
  journaledCharges = 0;
  /** An extension found it past its expiry or gone: its hold may have been released already.
   * It is retired then, and never extended again: each try would be another store write and
   * warning, every tick, for as long as its calls run. */
  expiryLost = false;

  constructor(
    readonly reference: string,
    readonly accountId: string,
    readonly amountMicros: number,
    readonly openedAt: number,
    expiresAt: number,
    /** Given back after this long without calls. */
    readonly idleMs: number,
  ) {
    this.lastActivityAt = openedAt;
    this.expiresAt = expiresAt;
  }

  /** Unreserved, unspent money left in the hold. */
  get availableMicros(): number {
    return this.heldMicros - this.reservedMicros - this.spentMicros;
  }

  /** What the ledger still holds for it: the amount, less what trimRest() gave back. */
  get heldMicros(): number {
    return this.amountMicros - this.trimmed;
  }

  /** What trimRest() gave back (0 until it did). */
  get trimmedMicros(): number {
    return this.trimmed;
  }

  /** Closed and no call still running against it: ready to settle with the ledger. */
  get isDrained(): boolean {
    return this.closed && this.running.size === 0;
  }

  /** Some call reserved from it since it opened. */
  get hasServedCalls(): boolean {
    return this.largestReservationMicros > 0;
  }

  get callsInFlight(): number {
    return this.running.size;
  }

  canCover(amountMicros: number): boolean {
    return !this.closed && this.availableMicros >= amountMicros;
  }

  /** Takes no new reservations from now on; running calls still settle into it. */
  close(now = Date.now()): void {
    if (!this.closed) this.closedAt = now;
    this.closed = true;
  }

  /** What the running calls reserved. */
  get runningReservedMicros(): number {
    return this.reservedMicros;
  }

  /**
   * Hands the calls still running to `carrier`, a closed lease whose hold covers what they
   * reserved: this lease is drained then, and settles for the calls that ended, while the long
   * ones end on the carrier. Without it, one stream held open for minutes kept every call that
   * shared its lease off the ledger and out of the usage records (account-budgets.ts).
   */
  moveRunningCallsTo(carrier: SpendLease): void {
    if (carrier.availableMicros < this.reservedMicros) throw new Error(`lease ${carrier.reference} cannot carry ${this.reservedMicros} micro-USD`);
    for (const reservation of this.running) {
      reservation.moveTo(carrier);
      carrier.running.add(reservation);
    }
    carrier.reservedMicros += this.reservedMicros;
    carrier.largestReservationMicros = Math.max(carrier.largestReservationMicros, this.largestReservationMicros);
    this.running.clear();
    this.reservedMicros = 0;
  }

  /**
   * For a closed lease whose calls still run: gives up the unreserved rest, so the hold shrinks
   * to what those calls reserved and spent. Returns the amount, which the caller must then trim
   * on the ledger; 0 when there is nothing to give up or it was done before (once per lease).
   */
  trimRest(): number {
    if (!this.closed || this.running.size === 0 || this.trimmed > 0) return 0;
    const rest = this.availableMicros;
    if (rest <= 0) return 0;
    this.trimmed = rest;
    return rest;
  }

  reserve(amountMicros: number, call: BilledCall, now: number): Reservation {
    if (!this.canCover(amountMicros)) throw new Error(`lease ${this.reference} cannot cover ${amountMicros} micro-USD`);
    this.reservedMicros += amountMicros;
    this.largestReservationMicros = Math.max(this.largestReservationMicros, amountMicros);
    this.lastActivityAt = now;
    const reservation = new Reservation(this, amountMicros, call);
    this.running.add(reservation);
    return reservation;
  }

  /** Called once per reservation, by the reservation. */
  finish(reservation: Reservation, chargedMicros: number, call: BilledCall, figures: UsageFigures | null, now: number): void {
    this.running.delete(reservation);
    this.reservedMicros -= reservation.reservedMicros;
    this.spentMicros += chargedMicros;
    this.lastActivityAt = now;
    if (figures === null) return;
    this.charges += 1;
    const id = `${call.keyId}\u0000${call.modelId}\u0000${call.kind}`;
    let tally = this.usage.get(id);
    if (!tally) {
      tally = { call, requests: 0, input_tokens: 0, output_tokens: 0, images: 0, spend_micros: 0 };
      this.usage.set(id, tally);
    }
    tally.requests += 1;
    tally.input_tokens += figures.inputTokens ?? 0;
    tally.output_tokens += figures.outputTokens ?? 0;
    tally.images += figures.images ?? 0;
    tally.spend_micros += chargedMicros;
  }

  statement(at: Date): LeaseStatement {
    return {
      spentMicros: this.spentMicros,
      usage: [...this.usage.values()].map((tally) => ({
        // One record per (lease, key, model, kind): a retried settlement rewrites the same ids.
        _id: `${this.reference}:${tally.call.keyId}:${tally.call.modelId}:${tally.call.kind}`,
        account_id: this.accountId,
        key_id: tally.call.keyId,
        model: tally.call.modelId,
        kind: tally.call.kind,
        requests: tally.requests,
        video_seconds: 0,
        input_tokens: tally.input_tokens,
        output_tokens: tally.output_tokens,
        images: tally.images,
        spend_micros: tally.spend_micros,
        at,
      })),
    };
  }
}

/** One call's share of a lease: settled exactly once, by a charge or a release. */
export class Reservation {
  private settled = false;

  constructor(
    private lease: SpendLease,
    readonly reservedMicros: number,
    private readonly call: BilledCall,
  ) {}

  /** Settles into `lease` from now on (SpendLease.moveRunningCallsTo). */
  moveTo(lease: SpendLease): void {
    this.lease = lease;
  }

  /**
   * Charges `priceMicros` and records the call's usage. The price is capped at the reservation
   * unless `allowOverage` (the upstream reported more tokens than the estimate): the excess is
   * then debited from the balance when the lease settles, as far as the balance goes.
   * Returns what was charged.
   */
  charge(priceMicros: number, figures: UsageFigures, options: { allowOverage: boolean }, now = Date.now()): number {
    if (this.settled) return 0;
    this.settled = true;
    const charged = options.allowOverage ? priceMicros : Math.min(priceMicros, this.reservedMicros);
    this.lease.finish(this, charged, this.call, figures, now);
    return charged;
  }

  /** Nothing to pay: the whole reservation returns to the lease. */
  release(now = Date.now()): void {
    if (this.settled) return;
    this.settled = true;
    this.lease.finish(this, 0, this.call, null, now);
  }
}
