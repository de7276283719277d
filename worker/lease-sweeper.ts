import type { BudgetLeaseStore } from '../store/budget-leases.ts';
import { releaseExpiredLease } from '../store/expired-leases.ts';
import type { Ledger } from '../store/ledger.ts';

// An api process that dies with a spend lease open (api/services/billing/account-budgets.ts)
// leaves its hold on the ledger; once the lease is past its expiry, the sweeper settles it from
// its journal (store/expired-leases.ts says how, and why that bills nobody twice). Journals left
// behind by a process that settled its lease and died before it removed the journal go after
// ORPHAN_JOURNAL_MS.

const ORPHAN_JOURNAL_MS = 10 * 60_000;

export async function sweepExpiredLeases(options: { ledger: Ledger; leases: BudgetLeaseStore; log?: (message: string) => void }, at?: Date): Promise<number> {
  // On the store's clock, as the leases' processes wrote their expiry.
  const now = at ?? new Date(await options.leases.clock.current());
  const expired = await options.leases.expiredBefore(now, 100);
  for (const lease of expired) {
    const outcome = await releaseExpiredLease(options, lease);
    if (outcome !== 'no hold') options.log?.(`sweeper released the expired spend lease ${lease._id} (${outcome})`);
  }
  const { leases } = options;
  await leases.journal.removeOrphans(async (references) => (await leases.openAmong(references)).map((lease) => lease._id), new Date(Date.now() - ORPHAN_JOURNAL_MS), 1_000);
  return expired.length;
}
