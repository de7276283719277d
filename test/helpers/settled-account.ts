import type { AccountStore, AccountWithTotals } from '../../store/accounts.ts';

/** The account once it holds nothing, polled from the store: chat and image calls are paid from
 * spend leases, which settle with the ledger a moment after the account's last call. */
export async function settledAccount(accounts: AccountStore, accountId: string, timeoutMs = 5_000): Promise<AccountWithTotals> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const account = await accounts.find(accountId);
    if (!account) throw new Error(`no account ${accountId}`);
    if (account.held_micros === 0) return account;
    if (Date.now() > deadline) throw new Error(`account ${accountId} still holds ${account.held_micros} micro-USD`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
