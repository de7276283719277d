import { GatewayError } from '../../core/errors.ts';
import type { AccountStore, AccountWithTotals } from '../../store/accounts.ts';
import { formatUsd } from './billing/insufficient-balance.ts';

// Taking credit back from an account (the admin API's and the operator console's deductions),
// with one refusal for both: what is free, and why the rest cannot be taken now.

/** The account after the deduction (null when there is no such account); a 409 when its free
 * balance is smaller than the amount, and nothing is taken then. */
export async function deductCredit(accounts: AccountStore, accountId: string, amountMicros: number, reference?: string): Promise<AccountWithTotals | null> {
  const outcome = await accounts.deduct(accountId, amountMicros, reference);
  if (outcome !== 'insufficient_balance') return outcome;
  const account = await accounts.find(accountId);
  const free = account?.balance_micros ?? 0;
  const held = account?.held_micros ?? 0;
  throw new GatewayError(
    'conflict',
    `Cannot take ${formatUsd(amountMicros)} back: the account's free balance is ${formatUsd(free)}${held > 0 ? `, and ${formatUsd(held)} is held for calls and tasks in flight until they settle` : ''}. Nothing was taken.`,
    'amount_usd',
  );
}
