import type { FastifyBaseLogger } from 'fastify';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { SpendLease } from './spend-lease.ts';

// Keeps a live process's spend leases from being released as expired (account-budgets.ts asks
// at every tick). Expiry is on the store's clock (store/store-clock.ts), since other processes
// and the worker's sweeper judge it on that one: a lease is pushed forward once less than half
// of `expiryMs` is left, and one found past its expiry or released already takes no more calls.

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
        if (extended) {
          lease.expiresAt = Math.max(lease.expiresAt, expiresAt);
          return;
        }
        // Its settlement charges its calls even so (retired-leases.ts).
        lease.expiryLost = true;
        log.warn({ lease: lease.reference }, 'a spend lease expired before it could be extended; it takes no more calls');
        lost(lease);
      },
      (error: unknown) => log.warn({ err: error, lease: lease.reference }, 'extending a spend lease failed; will retry'),
    )
    .finally(() => (lease.extending = false));
}
