import { GatewayError } from '../../core/errors.ts';
import type { AccountStore, AccountWithTotals } from '../../store/accounts.ts';
import type { AccountBudgets } from './billing/account-budgets.ts';
import { formatUsd } from './billing/insufficient-balance.ts';

// Taking credit back from an account (the admin API's and the operator console's deductions),
// with one refusal for both: what is free, and why the rest cannot be taken now.

export class CreditDeductions {
  constructor(
    private readonly accounts: AccountStore,
    private readonly budgets: Pick<AccountBudgets, 'takeWithLeasesBack'>,
  ) {}

  /** The account after the deduction (null when there is no such account); a 409 when its free
   * balance is smaller than the amount, and nothing is taken then. */
  async deduct(accountId: string, amountMicros: number, reference?: string): Promise<AccountWithTotals | null> {
    let outcome = await this.accounts.deduct(accountId, amountMicros, reference);
    if (outcome === 'insufficient_balance') {
      // Money leased to api processes for calls to come, but reserved by none, is free money
      // parked: asked back as a call short of balance asks for it. Without this, one call's idle
      // lease held $1 of a $20 account and refused a $19.50 deduction for five minutes.
      ({ result: outcome } = await this.budgets.takeWithLeasesBack(accountId, amountMicros, () => this.accounts.deduct(accountId, amountMicros, reference)));
    }
    if (outcome !== 'insufficient_balance') return outcome;
    const account = await this.accounts.find(accountId);
    const free = account?.balance_micros ?? 0;
    const held = account?.held_micros ?? 0;
    throw new GatewayError(
      'conflict',
      `Cannot take ${formatUsd(amountMicros)} back: the account's free balance is ${formatUsd(free)}${held > 0 ? `, and ${formatUsd(held)} is held for calls and tasks in flight until they settle` : ''}. Nothing was taken.`,
      'amount_usd',
    );
  }
}
