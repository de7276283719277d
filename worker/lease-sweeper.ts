import type { BudgetLeaseStore } from '../store/budget-leases.ts';
import type { Ledger } from '../store/ledger.ts';

// An api process that dies with a spend lease open (api/services/billing/account-budgets.ts)
// leaves its hold on the ledger. Live processes keep pushing their leases' expiry forward, so a
// lease past its expiry belongs to a dead process: its hold is released (what its last calls
// cost is lost, which never bills anyone twice) and its document is removed.
//
// The release only runs when the lease's hold entry exists: a release without one would return
// money that other holds of the account set aside. Capture and release share one ledger slot,
// so a lease its process did settle after all is left alone ('conflict').

export async function sweepExpiredLeases(options: { ledger: Ledger; leases: BudgetLeaseStore; log?: (message: string) => void }, now = new Date()): Promise<number> {
  const expired = await options.leases.expiredBefore(now, 100);
  for (const lease of expired) {
    const hold = await options.ledger.find(lease._id, 'hold');
    if (hold) {
      const outcome = await options.ledger.apply({ accountId: lease.account_id, keyId: null, reference: lease._id, operation: 'release', amountMicros: hold.amount_micros });
      options.log?.(`sweeper released the expired spend lease ${lease._id} (${outcome})`);
    }
    await options.leases.remove(lease._id);
  }
  return expired.length;
}
