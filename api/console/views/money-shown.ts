import type { AccountWithAvailable } from '../../../store/accounts.ts';

// An account's money as the console shows it. The ledger's free balance leaves out what api
// processes keep leased for the account's next chat and image calls (minutes after the last
// one), so a holder read "balance $0.00" after one call. Shown instead: what the account can
// spend now, counting that unspent lease money; what is held for work in flight (video tasks,
// calls not settled yet); and what it spent. The three add up to the ledger's three.

export interface MoneyShown {
  availableMicros: number;
  heldMicros: number;
  spentMicros: number;
}

export function moneyShown(account: AccountWithAvailable): MoneyShown {
  return {
    availableMicros: account.available_micros,
    heldMicros: account.held_micros - (account.available_micros - account.balance_micros),
    spentMicros: account.spent_micros,
  };
}
