// Money taken from an account directly rather than through a spend lease: a video task's hold,
// an operator's deduction. When the free balance falls short, the account's unreserved leased
// money is given back first (account-budgets.ts returnUnused). On a small account a lease holds
// the whole balance, and this process's chat callers waiting for a lease opened a new one as
// soon as the old one settled, before the take: a review saw 5 of 12 affordable video
// submissions refused 403 while tiny chat calls ran ($0.80 account), and deductions 409. So while
// a take gives leases back and takes its money, this process opens no lease of that account.

export class DirectTakes {
  private readonly underWay = new Map<string, Promise<unknown>>();

  /** Runs `work` as the account's take; a take that comes meanwhile waits for it first. */
  async run<Result>(accountId: string, work: () => Promise<Result>): Promise<Result> {
    while (this.underWay.has(accountId)) await this.underWay.get(accountId)!.catch(() => undefined);
    const taking = work();
    this.underWay.set(accountId, taking);
    try {
      return await taking;
    } finally {
      if (this.underWay.get(accountId) === taking) this.underWay.delete(accountId);
    }
  }

  /** The account's take under way, for a lease opening to wait for. */
  of(accountId: string): Promise<unknown> | undefined {
    return this.underWay.get(accountId);
  }
}
