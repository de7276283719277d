import { AccountStore } from '../../store/accounts.ts';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { Ledger } from '../../store/ledger.ts';
import { UsageStore } from '../../store/usage.ts';
import { testDatabase } from './engines.ts';

// What the spend-lease tests build their AccountBudgets from: a test database and its stores.

/** A log for the budgets that keeps nothing. */
export const silent = { warn() {}, error() {} };
/** A chat call as the budgets bill it. */
export const chatCall = { keyId: 'key_a', modelId: 'gpt-4o-mini', kind: 'chat' as const };

export interface BudgetStores {
  database: Awaited<ReturnType<typeof testDatabase>>;
  accounts: AccountStore;
  ledger: Ledger;
  leases: BudgetLeaseStore;
  usage: UsageStore;
}

export async function budgetStores(label: string): Promise<BudgetStores> {
  const database = await testDatabase(label);
  return {
    database,
    accounts: new AccountStore(database.db),
    ledger: new Ledger(database.db),
    leases: new BudgetLeaseStore(database.db),
    usage: new UsageStore(database.db),
  };
}
