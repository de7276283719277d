import ipaddr from 'ipaddr.js';
import { GatewayError } from './errors.ts';

// Failed attempts per caller address, counted so that guessing from one address stays slow and
// costs nothing to callers who get it right: keys that pass their checksum but are in no cache
// (api/plugins/unknown-key-throttle.ts), wrong operator tokens on /admin and /metrics (the
// api's admin-auth.ts and metrics.ts, the worker's metrics-server.ts). An attempt counts as
// failed from the moment it is let through, and is forgiven when it succeeds: counted only when
// it came back, any number sent at once all went through.
//
// Fixed windows, in memory, per process: a cap on what each process lets one address try, not
// an exact count across processes. The api's addresses are the request's `ip` (TRUST_PROXY says
// which proxies may name the caller); IPv6 callers count per /64, which one host can hold whole.

/** What one caller is counted as: an IPv4 address (an IPv4-mapped IPv6 one too), or an IPv6 /64. */
export function callerOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${(parsed as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16)).join(':')}::/64`;
}

/** Callers counted at most at once. Past that (many IPv6 /64s, a window of 10 minutes), the
 * counts start again from nothing: memory stays bounded, and a guesser gains 20 tries for every
 * 100,000 requests from other addresses, nothing worth the trouble. */
const MAX_CALLERS = 100_000;

export interface FailureLimit {
  windowMs: number;
  /** Attempts one address may fail in a window. */
  failures: number;
}

export class FailuresByAddress {
  private window = -1;
  /** Failed (or not yet decided) attempts in the current window, by caller. */
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly limit: FailureLimit,
    private readonly now: () => number = Date.now,
  ) {}

  /** 0 when the attempt may be made: it counts as failed until forgive() takes it back. Else the
   * seconds until the window ends, when this address may try again. */
  admit(address: string): number {
    const now = this.now();
    this.roll(now);
    const caller = callerOf(address);
    if (this.failures.size >= MAX_CALLERS && !this.failures.has(caller)) this.failures.clear();
    const failures = this.failures.get(caller) ?? 0;
    if (failures < this.limit.failures) {
      this.failures.set(caller, failures + 1);
      return 0;
    }
    return Math.max(1, Math.ceil(((this.window + 1) * this.limit.windowMs - now) / 1_000));
  }

  /** The attempt admitted for this address succeeded: it does not count. */
  forgive(address: string): void {
    const caller = callerOf(address);
    const failures = this.failures.get(caller);
    if (failures !== undefined && failures > 0) this.failures.set(caller, failures - 1);
  }

  /** The counts of a past window are dropped whole, so the map holds one window's callers. */
  private roll(now: number): void {
    const window = Math.floor(now / this.limit.windowMs);
    if (window === this.window) return;
    this.window = window;
    this.failures.clear();
  }
}

/** Wrong operator tokens (ADMIN_TOKEN on /admin, METRICS_TOKEN on /metrics, each counted apart)
 * one address may send in a window; past them, its requests are refused, the right token's too,
 * until the window ends. Enough for an operator's typos, few enough that a short token is not
 * guessed. */
export const OPERATOR_TOKEN_GUESSES: FailureLimit = { windowMs: 10 * 60_000, failures: 20 };

/** The 429 for an address past its wrong operator tokens. */
export function tooManyWrongTokens(what: string, waitSeconds: number): GatewayError {
  return new GatewayError('rate_limit_exceeded', `Too many wrong ${what} tokens from this address; retry in ${waitSeconds} s.`, undefined, {
    'retry-after': String(waitSeconds),
  });
}
