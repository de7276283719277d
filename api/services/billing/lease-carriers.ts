import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { newId } from '../../../core/ids.ts';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { Ledger } from '../../../store/ledger.ts';
import type { RetiredLeases } from './retired-leases.ts';
import { SpendLease } from './spend-lease.ts';

// A retired spend lease settles once its last call ends (retired-leases.ts). One long call (a
// stream held open for minutes) would then keep every call that shared its lease off the ledger
// and out of the usage records for as long as it ran: up to the upstream's timeouts, 10
// minutes. So a retired lease that calls still run on, and that charged calls which ended, hands
// the running ones to a carrier once it has waited `afterMs`: a new hold of just what they
// reserved, closed to new calls. The lease then settles for the calls that ended; the long ones
// end on the carrier, which settles like any retired lease. It needs that much of the balance
// free for a moment (both holds exist until the old one settles); without it, it tries again
// `afterMs` later.

export interface LeaseCarrierStores {
  ledger: Ledger;
  leases: BudgetLeaseStore;
  log: Pick<FastifyBaseLogger, 'warn'>;
}

export class LeaseCarriers {
  /** When each retired lease last tried to hand its running calls to a carrier. */
  private readonly tries = new WeakMap<SpendLease, number>();
  /** Retired leases handing their calls to a carrier right now, and the carriers being opened:
   * this process's own leases, which its callers never ask back. */
  private readonly carrying = new Set<SpendLease>();

  constructor(
    private readonly stores: LeaseCarrierStores,
    private readonly retired: RetiredLeases,
    private readonly timing: { afterMs: number; expiryMs: number },
  ) {}

  /** Starts a carry for every retired lease due one (the budgets' timer calls this). */
  tick(now: number): void {
    for (const lease of this.retired.all()) if (this.due(lease, now)) void this.carry(lease, now);
  }

  /** The leases of a carry under way: this process's, though not yet (or no longer) retired. */
  underWay(): Iterable<SpendLease> {
    return this.carrying;
  }

  private due(lease: SpendLease, now: number): boolean {
    if (lease.isDrained || lease.charges === 0 || lease.expiryLost || lease.closedAt === undefined || this.carrying.has(lease)) return false;
    return now - Math.max(lease.closedAt, this.tries.get(lease) ?? 0) >= this.timing.afterMs;
  }

  private async carry(lease: SpendLease, now: number): Promise<void> {
    this.tries.set(lease, now);
    const { ledger, leases, log } = this.stores;
    const amountMicros = lease.runningReservedMicros;
    const expiresAt = (await leases.clock.current().catch(() => undefined)) ?? leases.clock.now();
    // Known as this process's own before its documents exist: its callers never ask it back.
    const carrier = new SpendLease(newId('lease'), lease.accountId, amountMicros, Date.now(), expiresAt + this.timing.expiryMs, lease.idleMs);
    carrier.close();
    this.carrying.add(lease).add(carrier);
    const base = { accountId: lease.accountId, keyId: null, reference: carrier.reference };
    try {
      await leases.open({ _id: carrier.reference, account_id: lease.accountId, amount_micros: amountMicros, opened_at: new Date(now), expires_at: new Date(carrier.expiresAt), carries_calls: true });
      if ((await ledger.apply({ ...base, operation: 'hold', amountMicros })) !== 'applied') {
        await leases.remove(carrier.reference);
        return;
      }
      // Calls may have ended meanwhile, never started: the carrier covers what still runs, and
      // releases its whole hold at once when nothing does.
      if (!lease.isDrained) lease.moveRunningCallsTo(carrier);
      this.retired.add(carrier);
      // The timer may have settled it already, once its last call ended during the carry.
      if (this.retired.has(lease)) this.retired.settle(lease);
    } catch (error) {
      log.warn({ ...failureFields(error), lease: lease.reference }, 'moving long calls off a spend lease failed; it settles when they end, or tries again');
    } finally {
      this.carrying.delete(lease);
      this.carrying.delete(carrier);
    }
  }
}
