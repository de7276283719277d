import { GatewayError } from '../../core/errors.ts';
import { MAX_ACCOUNT_FUNDS_MICROS } from '../../core/money.ts';
import type { AccountStore, AccountWithTotals } from '../../store/accounts.ts';
import { formatUsd } from './billing/insufficient-balance.ts';

// Adding credits to an account (the admin API's and the operator console's), with one refusal
// for both: an account holds at most MAX_ACCOUNT_FUNDS_MICROS, so its money stays exact.

/** The account after the credit (null when there is no such account); a 409 when the account
 * would then hold more than the limit, and nothing is added then. */
export async function addCredits(accounts: AccountStore, accountId: string, amountMicros: number, reference?: string): Promise<AccountWithTotals | null> {
  const outcome = await accounts.credit(accountId, amountMicros, reference);
  if (outcome !== 'funds_limit') return outcome;
  const account = await accounts.find(accountId);
  const holds = (account?.balance_micros ?? 0) + (account?.held_micros ?? 0);
  throw new GatewayError(
    'conflict',
    `Cannot add ${formatUsd(amountMicros)}: the account holds ${formatUsd(holds)} (free and held), and an account may hold at most ${formatUsd(MAX_ACCOUNT_FUNDS_MICROS)}. Nothing was added.`,
    'amount_usd',
  );
}
