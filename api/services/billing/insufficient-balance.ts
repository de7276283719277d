import { GatewayError } from '../../../core/errors.ts';
import { microsToUsd } from '../../../core/money.ts';

// The 403 of a call or video task the balance cannot cover. Money held for requests still
// running (a video task, another api process's spend lease with a stream open) is not
// available, though it is still the account's: the message says how much is held and that its
// unspent part comes back, so the caller can tell "add credits" from "retry once those end".

/** An amount as the error messages write it: dollars with all six decimals. */
export function formatUsd(micros: number): string {
  return `$${microsToUsd(micros).toFixed(6)}`;
}

/** `cost` says what was asked ("this task costs $…"); `advice` what to do about it. */
export function insufficientBalance(cost: string, totals: { availableMicros: number; heldMicros: number }, advice: string): GatewayError {
  const held = totals.heldMicros > 0 ? ` (${formatUsd(totals.heldMicros)} more is held for requests in progress; what they do not spend comes back when they end)` : '';
  return new GatewayError('insufficient_balance', `Insufficient balance: ${cost} and the account has ${formatUsd(totals.availableMicros)} available${held}. ${advice}`);
}
