import type { FastifyBaseLogger } from 'fastify';

// Idempotency-Key records the store refused as their request ended, written again once it is
// back. The answer has gone out meanwhile (the work is done: an image call is charged), so the
// record must follow it: left in flight, a retry would meet a 409 and then, once the record went
// stale, run and pay for the work again.

/** Pauses before writing a record again: about a minute in all, past the stale window of every
 * route. */
const DELAYS_MS = [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000];
/** How long those tries go on, whatever their pauses: a close shortens the pauses, not this. */
const WRITES_FOR_MS = DELAYS_MS.reduce((sum, delayMs) => sum + delayMs, 0);
/** The pause between those tries once the app is closing: the close waits for them, bounded by
 * its force deadline (graceful-close.ts), and the store is likely back by then. */
const CLOSING_RETRY_MS = 250;

export class LaterRecordWrites {
  /** A write paused for 16 s when the close began held an idle process's close until its
   * force deadline though the store was back: the close wakes the paused writes. */
  private readonly paused = new Set<() => void>();
  private closing = false;

  /** Tries `write` again after growing pauses until it lands or WRITES_FOR_MS have passed. */
  async write(write: () => Promise<unknown>, log: FastifyBaseLogger): Promise<void> {
    const giveUpAt = Date.now() + WRITES_FOR_MS;
    for (let attempt = 0; Date.now() < giveUpAt; attempt++) {
      await this.pause(DELAYS_MS[Math.min(attempt, DELAYS_MS.length - 1)]!);
      try {
        await write();
        return;
      } catch {
        // The store is still away: try again after a longer pause.
      }
    }
    log.error('gave up writing an Idempotency-Key record; a retry under its key may run again once the record is stale');
  }

  /** The app is closing: paused writes go on at once, and later pauses are short. */
  close(): void {
    this.closing = true;
    for (const wake of [...this.paused]) wake();
  }

  private pause(delayMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.paused.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.closing ? CLOSING_RETRY_MS : delayMs);
      timer.unref();
      this.paused.add(wake);
    });
  }
}
