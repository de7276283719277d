// How much a new spend lease holds. Enough for a run of calls, so that most calls reserve from
// memory (8 worst cases of the call that opens it, at least $1), and enough for every caller of
// this process waiting for it, at most the free balance.
//
// A lease holds at least $1, so a balance below it went whole into one lease; between two api
// processes serving such an account, that was a ping-pong: each asked the other's whole-balance
// lease back, and the other's waiting callers took the money again before the asker could. So
// a shared account's leases (shared-accounts.ts) hold a quarter of the free balance rather than
// $1 (or 8 worst cases, when more), and at most half of it: the other process finds the rest
// free. Only the callers waiting for the lease may take more than half, since they reserve it
// the moment it is held.

/** The share of the free balance a lease of a shared account holds at least (below $1). */
const SHARED_LEASE_SHARE = 1 / 4;
/** The share of the free balance a lease of a shared account holds at most (unless the callers
 * waiting for it need more). */
const SHARED_LEASE_CAP = 1 / 2;

export interface LeaseSizeInput {
  availableMicros: number;
  /** The worst case of the call that opens the lease. */
  neededMicros: number;
  /** What the callers waiting for the lease need together (waiting-callers.ts). */
  waitingMicros: number;
  /** Another api process serves the account too. */
  shared: boolean;
  reservationsPerLease: number;
  minLeaseMicros: number;
}

export function leaseSize(input: LeaseSizeInput): number {
  const { availableMicros, waitingMicros } = input;
  const wanted = Math.max(input.neededMicros * input.reservationsPerLease, waitingMicros);
  if (!input.shared) return Math.min(availableMicros, Math.max(wanted, input.minLeaseMicros));
  const floorMicros = Math.min(input.minLeaseMicros, Math.floor(availableMicros * SHARED_LEASE_SHARE));
  const capMicros = Math.max(waitingMicros, Math.floor(availableMicros * SHARED_LEASE_CAP));
  return Math.min(availableMicros, capMicros, Math.max(wanted, floorMicros));
}
