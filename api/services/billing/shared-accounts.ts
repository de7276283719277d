// Accounts whose money another api process needed lately: a lease of theirs was asked back,
// by this process or from it (lease-recall.ts). Their leases are sized so that the other
// process finds part of a small balance free (lease-size.ts).

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
