import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { SpendLease } from './spend-lease.ts';

// Keeps a live process's spend leases from being released as expired (account-budgets.ts asks
// at every tick). Expiry is on the store's clock (store/store-clock.ts), since other processes
// and the worker's sweeper judge it on that one: a lease is pushed forward once less than half
// of `expiryMs` is left, and one found past its expiry or released already takes no more calls.
//
// The store's answer is trusted only when it came before the old expiry, less a margin. The
// write matched on the expiry as of the tick, but it may have run much later (a stalled store,
// the driver retrying it after a failover): past the old expiry, the sweeper or a process
// asking the money back may have released the hold meanwhile, and a lease extended then would
// go on spending money that is back in the balance. An answer before it proves the write ran
// before anyone could judge the lease expired; the margin covers how far two processes'
// readings of the store's clock (store/store-clock.ts) can disagree.

/** How much earlier than the old expiry an extension's answer must come (or a quarter of the
 * expiry, when shorter): readings of the store's clock are off by half a round trip. */
const LATE_MARGIN_MS = 2_000;

export interface LeaseExpiryOptions {
  leases: BudgetLeaseStore;
  expiryMs: number;
  log: Pick<FastifyBaseLogger, 'warn'>;
  /** The lease can no longer be extended: it must take no more calls. */
  lost(lease: SpendLease): void;
}

/** Pushes the expiry of each lease that is due forward, one store write each, in the background. */
export function extendExpiringLeases(leases: SpendLease[], storeNow: number, options: LeaseExpiryOptions): void {
  for (const lease of leases) {
    if (lease.isDrained || lease.extending || lease.expiryLost || lease.expiresAt - storeNow >= options.expiryMs / 2) continue;
    extend(lease, storeNow, options);
  }
}

function extend(lease: SpendLease, storeNow: number, { leases, expiryMs, log, lost }: LeaseExpiryOptions): void {
  const expiresAt = storeNow + expiryMs;
  lease.extending = true;
  leases
    .extend(lease.reference, new Date(expiresAt), new Date(storeNow))
    .then(
      (extended) => {
        const late = leases.clock.now() >= lease.expiresAt - Math.min(expiryMs / 4, LATE_MARGIN_MS);
        if (extended && !late) {
          lease.expiresAt = Math.max(lease.expiresAt, expiresAt);
          return;
        }
        // Its settlement charges its calls even so (retired-leases.ts).
        lease.expiryLost = true;
        if (extended) log.warn({ lease: lease.reference }, 'a spend lease was extended too late to be sure nobody released it meanwhile; it takes no more calls');
        else log.warn({ lease: lease.reference }, 'a spend lease expired before it could be extended; it takes no more calls');
        lost(lease);
      },
      (error: unknown) => log.warn({ ...failureFields(error), lease: lease.reference }, 'extending a spend lease failed; will retry'),
    )
    .finally(() => (lease.extending = false));
}
