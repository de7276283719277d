// Accounts whose money another api process needed lately: a lease of theirs was asked back,
// by this process or from it (lease-recall.ts). A lease holds at least minLeaseMicros, so a
// balance below it goes whole into one lease; between two processes that both serve such an
// account, that was a ping-pong: each asked the other's whole-balance lease back, and the
// other's waiting callers took the money again before the asker could (a review saw 4 to 12 of
// 96 affordable calls refused with 403, on $0.20 to $0.80 accounts over two api processes).
// So a shared account's leases hold what their calls need, not the floor (account-budgets.ts).

/** How long an account counts as shared after a lease of it was asked back. */
const SHARED_FOR_MS = 60_000;

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
