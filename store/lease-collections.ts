import type { Ledger } from './ledger.ts';

// What the ledger took for a spend lease, read back by whoever settles it (its process,
// api/services/billing/retired-leases.ts, or the release of an expired lease, expired-leases.ts):
// the usage records they write must add up to it.

/** What the ledger captured for a lease: nothing when its hold was released instead (capture and
 * release share one slot). */
export async function capturedFor(ledger: Ledger, accountId: string, reference: string): Promise<number> {
  const settled = await ledger.find(accountId, reference, 'capture');
  return settled?.operation === 'capture' ? settled.amount_micros : 0;
}

/** What the ledger collected for a lease: its capture and its process's debit of what its calls
 * cost beyond that. */
export async function collectedFor(ledger: Ledger, accountId: string, reference: string): Promise<number> {
  const debit = await ledger.find(accountId, reference, 'debit');
  return (await capturedFor(ledger, accountId, reference)) + (debit?.amount_micros ?? 0);
}
