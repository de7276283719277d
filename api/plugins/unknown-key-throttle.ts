import { GatewayError } from '../../core/errors.ts';
import { unavailableDependency } from '../../core/dependency-errors.ts';
import { FailuresByAddress } from '../../core/failures-by-address.ts';

// Keys that pass their checksum but are in no cache cost the store a read each (the key and its
// limits), and a key's checksum is public: anyone can make well-formed keys by the thousand,
// with no key to be rate limited by. A security review drove 263 such requests a second into
// the store from one address. So each caller address may make READS_PER_WINDOW reads that find
// no key per window; past that, a key this process has not cached is answered 429 without a
// read until the window ends. Keys in the cache (every key in use) are never held up, nor keys
// the process knows to exist (store/known-key-ids.ts): only guesses are.

export const WINDOW_MS = 10_000;
export const READS_PER_WINDOW = 30;
/** How long after a read the store failed a refusal is the store's 503, not the caller's 429. */
export const STORE_FAILURE_MEMORY_MS = 5_000;

export class UnknownKeyThrottle {
  private readonly misses: FailuresByAddress;
  /** The last read the store failed for want of the store, and when. */
  private storeFailure: { at: number; error: Error } | undefined;

  constructor(private readonly now: () => number = Date.now) {
    this.misses = new FailuresByAddress({ windowMs: WINDOW_MS, failures: READS_PER_WINDOW }, now);
  }

  /** Counts a read for a key no cache holds as one that finds no key, before it is made; keyFound()
   * takes it back. The 429 instead, once the address has used up its window; while the store
   * fails reads, the store's error, answered as every request in an outage is (a 503): those
   * reads say nothing of the keys (an outage review saw valid keys told they were unknown). */
  admitRead(address: string): Error | undefined {
    const seconds = this.misses.admit(address);
    if (seconds === 0) return undefined;
    if (this.storeFailure && this.now() - this.storeFailure.at < STORE_FAILURE_MEMORY_MS) return this.storeFailure.error;
    return new GatewayError(
      'rate_limit_exceeded',
      `Too many requests from this address with API keys this server has not seen lately; retry in ${seconds} s.`,
      undefined,
      { 'retry-after': String(seconds) },
    );
  }

  /** The read admitted for this address found its key: it does not count. */
  keyFound(address: string): void {
    this.misses.forgive(address);
  }

  /** The read admitted for this address failed. For want of the store, it found nothing and
   * does not count either; any other failure (a bug) stays counted, the safe side. */
  readFailed(address: string, error: unknown): void {
    if (!(error instanceof Error) || unavailableDependency(error) !== 'store') return;
    this.misses.forgive(address);
    this.storeFailure = { at: this.now(), error };
  }
}
