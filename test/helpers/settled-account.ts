import type { Db } from 'mongodb';
import type { AccountStore, AccountWithTotals } from '../../store/accounts.ts';

/** The account once it holds nothing, polled from the store: chat and image calls are paid from
 * spend leases, which settle with the ledger a moment after the account's last call. Given the
 * database, also once no lease of the account is left: a lease's usage records are written after
 * its capture, and its document removed after them (api/services/billing/retired-leases.ts), so
 * only then are the records in. A lease document that outlives the timeout with nothing held (one
 * awaiting a hold that never came) does not make it fail. */
export async function settledAccount(accounts: AccountStore, accountId: string, timeoutMs = 5_000, db?: Db): Promise<AccountWithTotals> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const account = await accounts.find(accountId);
    if (!account) throw new Error(`no account ${accountId}`);
    const leasesLeft = account.held_micros === 0 && db ? await db.collection('budget_leases').countDocuments({ account_id: accountId }) : 0;
    if (account.held_micros === 0 && (leasesLeft === 0 || Date.now() > deadline)) return account;
    if (Date.now() > deadline) throw new Error(`account ${accountId} still holds ${account.held_micros} micro-USD`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
