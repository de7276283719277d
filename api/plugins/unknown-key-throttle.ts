import { GatewayError } from '../../core/errors.ts';
import { FailuresByAddress } from '../../core/failures-by-address.ts';

// Keys that pass their checksum but are in no cache cost the store a read each (the key and its
// limits), and a key's checksum is public: anyone can make well-formed keys by the thousand,
// with no key to be rate limited by. A security review drove 263 such requests a second into
// the store from one address. So each caller address may make READS_PER_WINDOW reads that find
// no key per window; past that, a key this process has not cached is answered 429 without a
// read until the window ends. Keys in the cache (every key in use) are never held up.

export const WINDOW_MS = 10_000;
export const READS_PER_WINDOW = 30;

export class UnknownKeyThrottle {
  private readonly misses: FailuresByAddress;

  constructor(now: () => number = Date.now) {
    this.misses = new FailuresByAddress({ windowMs: WINDOW_MS, failures: READS_PER_WINDOW }, now);
  }

  /** Counts a read for a key no cache holds as one that finds no key, before it is made; keyFound()
   * takes it back. The 429 instead, once the address has used up its window. */
  admitRead(address: string): GatewayError | undefined {
    const seconds = this.misses.admit(address);
    if (seconds === 0) return undefined;
    return new GatewayError(
      'rate_limit_exceeded',
      `Too many requests with unknown API keys from this address; retry in ${seconds} s with a valid key.`,
      undefined,
      { 'retry-after': String(seconds) },
    );
  }

  /** The read admitted for this address found its key: it does not count. */
  keyFound(address: string): void {
    this.misses.forgive(address);
  }
}
