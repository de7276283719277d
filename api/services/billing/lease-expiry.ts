import type { FastifyBaseLogger } from 'fastify';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { SpendLease } from './spend-lease.ts';

// Keeps a live process's spend leases from being released as expired (account-budgets.ts asks
// at every tick). Expiry is on the store's clock (store/store-clock.ts), since other processes
// and the worker's sweeper judge it on that one: a lease is pushed forward once less than half
// of `expiryMs` is left, and one found past its expiry or released already takes no more calls.
//
// The store's answer is trusted only when it came while more than a quarter of the old expiry
// was left. The write matched on the expiry as of the tick, but it may have run much later (a
// stalled store, the driver retrying it after a failover): past the old expiry, the sweeper or
// a process asking the money back may have released the hold meanwhile, and a lease extended
// then would go on spending money that is back in the balance. A quarter is the margin a lease
// keeps anyway before it stops taking calls (account-budgets.ts).

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
        const late = leases.clock.now() >= lease.expiresAt - expiryMs / 4;
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
      (error: unknown) => log.warn({ err: error, lease: lease.reference }, 'extending a spend lease failed; will retry'),
    )
    .finally(() => (lease.extending = false));
}
