import type { RecallTiming } from './lease-recall.ts';

// When spend leases open, go back and get asked back (account-budgets.ts, lease-recall.ts), and
// how much they hold. Tests shorten the times.

/** At most this share of the free balance makes a lease a small one (see smallLeaseIdleMs). */
export const SMALL_LEASE_SHARE = 1 / 10;

export interface LeaseTiming extends RecallTiming {
  /** An account without calls for this long gives its lease back. */
  idleMs: number;
  /** The idle time of a small lease: one that held at most SMALL_LEASE_SHARE of the account's
   * free balance when it opened. Keeping it costs the account's other uses little (even with a
   * few api processes each keeping one), and spares a caller who calls every few seconds or
   * minutes the dozen store round trips of opening one in line. */
  smallLeaseIdleMs: number;
  /** A lease older than this is replaced, so the ledger and the usage records stay current. */
  maxAgeMs: number;
  /** How long the sweeper leaves a lease alone; pushed forward (at half time) while the lease is
   * open. So a dead process's leases are released about this long after it died. A live process
   * takes no new reservations from a lease whose expiry, as the store last confirmed it, is less
   * than a quarter of this away (account-budgets.ts): it never spends money the sweeper may be
   * handing back. */
  expiryMs: number;
  tickMs: number;
  /** How often a lease whose calls were charged writes its journal (store/lease-journal.ts):
   * the most a killed process's calls can go unbilled. */
  journalMs: number;
  /** The longest pause between two attempts to settle a lease (they start at 0.4 s and double). */
  settleRetryMaxMs: number;
  /** The smallest hold worth a ledger round trip (unless the balance is smaller). */
  minLeaseMicros: number;
  /** A lease covers this many worst-case reservations of the call that opened it. */
  reservationsPerLease: number;
}

export const DEFAULT_LEASE_TIMING: LeaseTiming = {
  // Long enough to span the pauses of an agent's tool loop or a person typing: opening a lease
  // is a dozen store round trips in line (about 35 ms on FerretDB), which a call after a pause
  // paid every time when leases went back 0.25 s after the last call.
  idleMs: 5_000,
  smallLeaseIdleMs: 5 * 60_000,
  maxAgeMs: 5_000,
  // Money a crashed process held comes back within half a minute (at once for a caller who
  // needs it, lease-recall.ts; else at the worker's next sweep). A live process keeps using a
  // lease through store outages of 7.5 to 22.5 s (see expiryMs) before its calls get 503.
  expiryMs: 30_000,
  tickMs: 100,
  journalMs: 1_000,
  settleRetryMaxMs: 5_000,
  minLeaseMicros: 1_000_000,
  reservationsPerLease: 8,
  recallPollMs: 500,
  // A tick: the asker of a shared account's lease waits for the look, on every call that finds
  // the balance short (10 reads a second, only while such a lease is held).
  sharedRecallPollMs: 100,
  // An idle lease comes back within a poll and a dozen store round trips (0.6 s). Shorter than
  // the 2 s without a hold after which an account's queue of video submissions counts as
  // stalled (hold-admission.ts): newcomers are then refused with 503.
  recallWaitMs: 1_500,
};
