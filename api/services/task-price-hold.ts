import type { AccountStore } from '../../store/accounts.ts';
import { MovementWithdrawn, type Ledger } from '../../store/ledger.ts';
import type { TaskStore } from '../../store/tasks.ts';
import type { Principal } from '../plugins/api-key-auth.ts';
import type { AccountBudgets } from './billing/account-budgets.ts';
import { balanceRefusal, formatUsd } from './billing/insufficient-balance.ts';
import type { UnansweredLeases } from './billing/lease-recall.ts';

// A video task's price held on its account's balance at submission, the step that turns a
// stored task into one the caller may be answered with.

export interface TaskPriceHoldStores {
  ledger: Ledger;
  tasks: Pick<TaskStore, 'remove'>;
  accounts: Pick<AccountStore, 'find'>;
  /** Chat and image spend leases of this process, which may be sitting on the balance. */
  budgets?: Pick<AccountBudgets, 'takeWithLeasesBack'>;
}

/** Holds the task's price, or removes the task and throws 403 when the balance is short (503
 * when the shortfall is held by leases of an api process that stopped answering). Nothing,
 * once `stillWanted` says no (the caller was answered meanwhile): the task is then closed by
 * the submission's abandon. */
export async function holdTaskPrice(stores: TaskPriceHoldStores, principal: Principal, taskId: string, priceMicros: number, stillWanted: () => boolean): Promise<'held' | 'withdrawn'> {
  const { ledger, tasks, accounts, budgets } = stores;
  const hold = () => ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference: taskId, operation: 'hold', amountMicros: priceMicros, stillWanted });
  try {
    let held = await hold();
    let unanswered: UnansweredLeases | null = null;
    // Asking leases back costs other processes' settlements: not for a caller already answered
    // (asked again after takeWithLeasesBack's waits).
    if (held === 'insufficient_balance' && budgets && stillWanted()) {
      // Part of the balance may be leased to chat calls (here or in another process) without
      // being spent.
      ({ result: held, unanswered } = await budgets.takeWithLeasesBack(principal.accountId, priceMicros, hold, stillWanted));
    }
    if (held !== 'applied') {
      await tasks.remove(taskId);
      const account = await accounts.find(principal.accountId);
      const totals = { availableMicros: account?.balance_micros ?? 0, heldMicros: account?.held_micros ?? 0, unanswered };
      throw balanceRefusal(priceMicros, `this task costs ${formatUsd(priceMicros)}`, totals, 'Add credits and retry.');
    }
    return 'held';
  } catch (error) {
    if (error instanceof MovementWithdrawn) return 'withdrawn';
    throw error;
  }
}
