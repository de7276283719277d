import ipaddr from 'ipaddr.js';
import { GatewayError } from '../../core/errors.ts';

// Keys that pass their checksum but are in no cache cost the store a read each (the key and its
// limits), and a key's checksum is public: anyone can make well-formed keys by the thousand,
// with no key to be rate limited by. A security review drove 263 such requests a second into
// the store from one address. So each caller address may make READS_PER_WINDOW reads that find
// no key per window; past that, a key this process has not cached is answered 429 without a
// read until the window ends. Keys in the cache (every key in use) are never held up.
//
// Counted per api process, in memory: a cap on the store reads of each process, not an exact
// count across processes. Addresses are the request's `ip` (TRUST_PROXY says which proxies
// may name the caller); IPv6 callers count per /64, which one host can hold whole.

export const WINDOW_MS = 10_000;
export const READS_PER_WINDOW = 30;

/** What one caller is counted as: an IPv4 address (an IPv4-mapped IPv6 one too), or an IPv6 /64. */
export function callerOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  return `${(parsed as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16)).join(':')}::/64`;
}

export class UnknownKeyThrottle {
  private window = -1;
  /** Reads that found no key in the current window, by caller. */
  private readonly misses = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Counts a read for a key no cache holds as one that finds no key, before it is made (counted
   * when it came back, any number sent at once all went through); keyFound() takes it back. The
   * 429 instead, once the address has used up its window. */
  admitRead(address: string): GatewayError | undefined {
    const now = this.now();
    this.roll(now);
    const caller = callerOf(address);
    const misses = this.misses.get(caller) ?? 0;
    if (misses < READS_PER_WINDOW) {
      this.misses.set(caller, misses + 1);
      return undefined;
    }
    const seconds = Math.max(1, Math.ceil(((this.window + 1) * WINDOW_MS - now) / 1_000));
    return new GatewayError(
      'rate_limit_exceeded',
      `Too many requests with unknown API keys from this address; retry in ${seconds} s with a valid key.`,
      undefined,
      { 'retry-after': String(seconds) },
    );
  }

  /** The read admitted for this address found its key: it does not count. */
  keyFound(address: string): void {
    const caller = callerOf(address);
    const misses = this.misses.get(caller);
    if (misses !== undefined && misses > 0) this.misses.set(caller, misses - 1);
  }

  /** Fixed windows: the counts of a past one are dropped whole, so the map holds one window's callers. */
  private roll(now: number): void {
    const window = Math.floor(now / WINDOW_MS);
    if (window === this.window) return;
    this.window = window;
    this.misses.clear();
  }
}
