import type { BudgetLeaseStore } from './budget-leases.ts';
import type { Ledger, Totals } from './ledger.ts';

// What an account can spend now. The ledger's free balance leaves out the money api processes
// keep leased for the account's next chat and image calls (a small account's whole balance, for
// minutes after its last call), so it read $0.00 after one chat call. Available is the balance
// and, for each open lease, its hold less what its process gave back early (a trim) and what its
// calls cost as its journal last said (at most a second behind; calls under way not counted).
// A lease whose calls spent past its hold owes that overage to the balance, so it counts
// negative. A carrier's hold is reserved whole by the calls moved onto it, so it counts nothing.
//
// Every ledger entry is judged against the totals' snapshot: a lease held, trimmed or settled
// after the totals were read is taken as it stood then, so no money is counted twice. Entries
// are found by their markers alone (by _id; the fallback of Ledger.find scans the whole ledger
// on FerretDB). For pages and the admin API only, never a request's path.

export type TotalsWithAvailable = Totals & { available_micros: number };

export async function availableBalance(stores: { ledger: Ledger; leases: BudgetLeaseStore }, accountId: string): Promise<TotalsWithAvailable> {
  const { ledger, leases } = stores;
  const { seq, ...totals } = await ledger.snapshot(accountId);
  const open = await leases.ofAccount(accountId);
  const byLease = await Promise.all(
    open
      .filter((lease) => lease.carries_calls !== true)
      .map(async ({ _id: reference }) => {
        const [hold, trim, settle, journal] = await Promise.all([
          ledger.findMarked(reference, 'hold'),
          ledger.findMarked(reference, 'trim'),
          ledger.findMarked(reference, 'capture'),
          leases.journal.read(reference),
        ]);
        const before = <Entry extends { seq: number }>(entry: Entry | null) => (entry !== null && entry.seq <= seq ? entry : null);
        if (!before(hold) || before(settle)) return 0;
        return hold!.amount_micros - (before(trim)?.amount_micros ?? 0) - (journal?.spent_micros ?? 0);
      }),
  );
  const unspent = byLease.reduce((sum, micros) => sum + micros, 0);
  // Between nothing and everything the balance and the held money are.
  const available = Math.min(Math.max(0, totals.balance_micros + unspent), totals.balance_micros + totals.held_micros);
  return { ...totals, available_micros: available };
}
