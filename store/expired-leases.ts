import type { BudgetLeaseDocument, BudgetLeaseStore } from './budget-leases.ts';
import { collectedFor } from './lease-collections.ts';
import type { Ledger, LedgerOutcome } from './ledger.ts';

// A spend lease past its `expires_at` belongs to an api process that died, or one that lost
// touch with the store: live processes keep pushing their leases' expiry forward, and stop
// spending from a lease they could not extend (api/services/billing/account-budgets.ts). What
// its journal (lease-journal.ts) says its calls cost is captured from its hold and the rest of
// the hold released, then their usage records are written; then its documents are removed.
// Only the calls after the journal's last write are lost if the process died (and any overage
// beyond the hold); a live one debits what its calls cost beyond that capture when it settles
// (retired-leases.ts). Either way nobody is billed twice. Two callers do it: the worker's
// sweeper, for every expired lease, and a caller that needs the account's money now
// (api/services/billing/lease-recall.ts), for that account's.
//
// The usage records come after the ledger, written over any there, to what it collected for
// the lease, read back (its capture, and its process's debit of an overage): that process may
// have captured, debited or written its records before it died, or some of that. Records
// inserted before the capture and otherwise left as they were once said 25,000 micro-USD
// beside a capture of the 10,000 hold. Written before the documents are removed, they are
// written again by whoever finds the lease next if this caller dies first. What this write can
// get wrong is a settlement of a process alive after all that debits and writes its own records
// between this caller's reads and this write (the store has no transactions to stop that): the
// journal is read again just before, which narrows that to about a round trip.
//
// The release only runs when the lease's hold entry exists: a release without one would return
// money that other holds of the account set aside. Capture and release share one ledger slot,
// so a lease its process did settle after all is left alone ('conflict'). A lease whose process
// gave part of the hold back early (a 'trim', see account-budgets.ts) has only the rest released;
// sealing its trim slot first keeps a trim from landing after the release.
//
// A lease found with no hold may have one on its way: its process writes the document before
// the hold, and the hold can wait behind the account's other movements, or a stalled store, past
// the expiry. Removed then, a hold that landed later would have no document for anyone to find,
// and would stay held for good if its process died before settling it. So the first time, the
// document is left for HOLD_GRACE_MS more (a live process that gets its hold that late finds the
// lease expired and settles it at once); the second time, it goes.

const HOLD_GRACE_MS = 10 * 60_000;

/** Settles an expired lease's hold from its journal (or releases it whole); what the ledger
 * said, or 'no hold' when there was none. */
export async function releaseExpiredLease(stores: { ledger: Ledger; leases: BudgetLeaseStore }, lease: Pick<BudgetLeaseDocument, '_id' | 'account_id' | 'hold_awaited'>): Promise<LedgerOutcome | 'no hold'> {
  const { ledger } = stores;
  const hold = await ledger.find(lease.account_id, lease._id, 'hold');
  let outcome: LedgerOutcome | 'no hold' = 'no hold';
  if (!hold && lease.hold_awaited !== true) {
    await stores.leases.awaitHold(lease._id, new Date(stores.leases.clock.now() + HOLD_GRACE_MS));
    return outcome;
  }
  if (hold) {
    const base = { accountId: lease.account_id, keyId: null, reference: lease._id };
    const sealed = await ledger.apply({ ...base, operation: 'seal', amountMicros: 0 });
    let trimmed = 0;
    if (sealed === 'conflict') {
      const trim = await ledger.find(lease.account_id, lease._id, 'trim');
      if (!trim) throw new Error(`lease ${lease._id}: its trim slot is taken but no trim entry was found`);
      trimmed = trim.amount_micros;
    }
    const held = hold.amount_micros - trimmed;
    const journal = await stores.leases.journal.read(lease._id);
    const captured = Math.min(journal?.spent_micros ?? 0, held);
    outcome =
      journal && captured > 0
        ? await ledger.apply({ ...base, operation: 'capture', amountMicros: captured, heldMicros: held })
        : await ledger.apply({ ...base, operation: 'release', amountMicros: held });
    // The usage records after the ledger, to what it collected (above: why). The journal is read
    // again just before: a settlement of its process, alive after all, may have written its whole
    // statement there since, or finished and removed it, and then its own records stand.
    const collected = await collectedFor(ledger, lease.account_id, lease._id);
    const latest = await stores.leases.journal.read(lease._id);
    if (latest) await stores.leases.journal.recordUsage(latest, collected);
  }
  await stores.leases.remove(lease._id);
  await stores.leases.journal.remove(lease._id);
  return outcome;
}
