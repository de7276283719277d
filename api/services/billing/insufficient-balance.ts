import { GatewayError } from '../../../core/errors.ts';
import { microsToUsd } from '../../../core/money.ts';
import { PENDING_RETRY_SECONDS, type UnansweredLeases } from './lease-recall.ts';

// The 403 of a call or video task the balance cannot cover. Money held for requests still
// running (a video task, another api process's spend lease with a stream open) is not
// available, though it is still the account's: the message says how much is held and that its
// unspent part comes back, so the caller can tell "add credits" from "retry once those end".
//
// One case is not a shortage at all: the money is in leases of an api process that died (or lost
// the store) and did not answer being asked for them. They come back when they expire, within
// half a minute, so that refusal is a 503 with Retry-After, which OpenAI clients retry by
// themselves, rather than a 403 that tells the caller to add credits. Likewise, with a second's
// Retry-After, when the money is in a lease another process opened while the caller waited,
// which its owner had not yet had a look's time to give back.

/** An amount as the error messages write it: dollars with all six decimals. */
export function formatUsd(micros: number): string {
  return `$${microsToUsd(micros).toFixed(6)}`;
}

/** `cost` says what was asked ("this task costs $…"); `advice` what to do about it. A cost
 * beyond all the account's money (`beyondAll`) is told against that total, free and held, as an
 * upper bound (calls may have spent part of what leases hold): the free balance alone read $0
 * beside an idle lease of the account's whole balance, which the console and the admin API
 * count as available. */
export function insufficientBalance(cost: string, totals: { availableMicros: number; heldMicros: number; beyondAll?: boolean }, advice: string): GatewayError {
  if (totals.beyondAll) {
    // "has at most $0.000000, counting what is held" read as a puzzle for an empty account.
    if (totals.availableMicros + totals.heldMicros <= 0) return new GatewayError('insufficient_balance', `Insufficient balance: ${cost} and the account has no balance, nor anything held for requests in progress. ${advice}`);
    const all = formatUsd(totals.availableMicros + totals.heldMicros);
    return new GatewayError('insufficient_balance', `Insufficient balance: ${cost} and the account has at most ${all}, counting what is held for requests in progress or set aside for its next calls. ${advice}`);
  }
  const held = totals.heldMicros > 0 ? ` (${formatUsd(totals.heldMicros)} more is held for requests in progress, or set aside for the account's next calls by a gateway process; what is not spent comes back to the balance)` : '';
  return new GatewayError('insufficient_balance', `Insufficient balance: ${cost} and the account has ${formatUsd(totals.availableMicros)} available${held}. ${advice}`);
}

/** The refusal of a request costing up to `neededMicros` that the free balance cannot cover:
 * 503 when the leases that did not answer would make up the difference, else 403. */
export function balanceRefusal(
  neededMicros: number,
  cost: string,
  totals: { availableMicros: number; heldMicros: number; unanswered?: UnansweredLeases | null; beyondAll?: boolean },
  advice: string,
): GatewayError {
  const { unanswered } = totals;
  if (!unanswered || totals.availableMicros + unanswered.micros < neededMicros) return insufficientBalance(cost, totals, advice);
  const silentMicros = unanswered.micros - unanswered.pendingMicros;
  // The pending leases' owners are alive and answer at their next look: when that money would
  // do, a second's wait, whatever the silent ones hold.
  const soon = unanswered.pendingMicros > 0 && totals.availableMicros + unanswered.pendingMicros >= neededMicros;
  const wait = soon ? PENDING_RETRY_SECONDS : unanswered.retryAfterSeconds;
  // Where the money is, the part the caller waits for first: "more" than what is available.
  const parts: Array<{ micros: number; where: string }> = [];
  if (silentMicros > 0) parts.push({ micros: silentMicros, where: 'is held by a gateway process that stopped responding' });
  if (unanswered.pendingMicros > 0) parts.push({ micros: unanswered.pendingMicros, where: 'is in a lease another gateway process has just opened and is being asked to give back' });
  if (soon) parts.reverse();
  const where = parts.map((part, index) => `${formatUsd(part.micros)}${index === 0 ? ' more' : ''} ${part.where}`).join(', and ');
  const when = soon ? `${silentMicros > 0 ? "That lease's money" : 'It'} should come back within a second` : `It returns to the balance within ${wait} s`;
  return new GatewayError(
    'service_unavailable',
    `Not enough free balance right now: ${cost} and the account has ${formatUsd(totals.availableMicros)} available, but ${where}. ${when}; nothing was charged. Retry after ${wait} s.`,
    undefined,
    { 'retry-after': String(wait) },
  );
}
