import { AccountStore } from '../../store/accounts.ts';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import type { Db } from 'mongodb';
import { Ledger, type LedgerOperation } from '../../store/ledger.ts';
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

/** A ledger whose movements of one kind (`operation`) wait until the test opens the gate: a
 * store too slow to keep up, or one step of a race between processes made to come last. (Once
 * open, every such movement goes straight through.) */
export class LedgerHeldBack extends Ledger {
  private open!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.open = resolve));
  private arrive!: () => void;
  /** Settles once a movement of the held kind has come to the gate. */
  readonly reached = new Promise<void>((resolve) => (this.arrive = resolve));

  constructor(
    db: Db,
    private readonly heldOperation: LedgerOperation,
  ) {
    super(db);
  }

  openGate(): void {
    this.open();
  }

  override async apply(input: Parameters<Ledger['apply']>[0]) {
    if (input.operation === this.heldOperation) {
      this.arrive();
      await this.gate;
    }
    return super.apply(input);
  }
}
