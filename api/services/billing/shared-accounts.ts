// Accounts whose money another api process needed lately: a lease of theirs was asked back,
// by this process or from it (lease-recall.ts). A lease holds at least minLeaseMicros, so a
// balance below it goes whole into one lease; between two processes that both serve such an
// account, that was a ping-pong: each asked the other's whole-balance lease back, and the
// other's waiting callers took the money again before the asker could (a review saw 4 to 12 of
// 96 affordable calls refused with 403, on $0.20 to $0.80 accounts over two api processes).
// So a shared account's leases hold a quarter of the free balance rather than the floor (or 8
// worst-case calls, when more), and never more than half of it unless one call needs more:
// the other process finds the rest free (account-budgets.ts, leaseSize).

/** How long an account counts as shared after a lease of it was asked back. */
const SHARED_FOR_MS = 60_000;

/** The share of the free balance a lease of a shared account holds at least (below $1). */
export const SHARED_LEASE_SHARE = 1 / 4;
/** The share of the free balance a lease of a shared account holds at most (unless one call
 * needs more). */
export const SHARED_LEASE_CAP = 1 / 2;

export class SharedAccounts {
  /** Until when (epoch ms) each account counts as shared. */
  private readonly until = new Map<string, number>();

  mark(accountId: string, now = Date.now()): void {
    this.until.set(accountId, now + SHARED_FOR_MS);
  }

  has(accountId: string, now = Date.now()): boolean {
    const until = this.until.get(accountId);
    return until !== undefined && until > now;
  }

  /** Forgets the accounts no longer shared. */
  prune(now: number): void {
    for (const [accountId, until] of this.until) if (until <= now) this.until.delete(accountId);
  }
}
