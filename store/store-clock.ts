import type { Db } from 'mongodb';

// The store's clock, as this process sees it. A spend lease's expiry is written by the process
// that holds it and judged by others (the worker's sweeper, a caller that needs the money):
// judged on their own clocks, a process whose clock ran 30 s behind had its live leases taken
// for a dead process's. All of them now read expiry on the one clock they share: the store's,
// from the `hello` command's `localTime` (MongoDB and FerretDB both answer it, and it needs no
// write), taken as the midpoint of the round trip and kept as an offset from the local clock.
//
// now() never waits: it answers with the last offset (the local clock until the first reading)
// and asks for a fresh reading in the background once the last is RESYNC_MS old. current()
// waits for that reading. A failed reading keeps the last offset; with none read yet, current()
// throws rather than answer with the local clock: the sweeper would then judge live leases on a
// clock running ahead, and an api process would open a lease already past its expiry on one
// running behind. Every lease's first expiry comes from current(), so now() is read only once
// some reading succeeded.

const RESYNC_MS = 30_000;
/** A reading whose round trip took longer is not taken: the store's time lies anywhere in the
 * round trip, and the midpoint can be off by half of it. A process paused (a stopped VM, a
 * blocked event loop) between sending its `hello` and reading the answer took the store for 20 s
 * behind after a 40 s pause, and judged its spend leases 20 s short of their real expiry: it
 * kept spending from, and extending, leases a sweeper was releasing. Half of this bound is well
 * inside the quarter of the lease expiry a process keeps in reserve (7.5 s). */
const MAX_ROUND_TRIP_MS = 2_000;

export class StoreClock {
  private offsetMs = 0;
  private readAt = -Infinity;
  /** Whether some reading succeeded: until then the offset is a guess. */
  private synced = false;
  /** Why the last reading failed: the store's own error, which callers answer as an outage. */
  private lastFailure: unknown;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    /** The local clock; tests skew it. */
    private readonly localNow: () => number = Date.now,
  ) {}

  /** The store's time now (epoch ms), without waiting. */
  now(): number {
    const local = this.localNow();
    if (local - this.readAt >= RESYNC_MS) void this.read();
    return local + this.offsetMs;
  }

  /** The store's time now (epoch ms), after a fresh reading when the last is stale. */
  async current(): Promise<number> {
    if (!this.synced || this.localNow() - this.readAt >= RESYNC_MS) await this.read();
    // The driver's error itself, so an api answers a 503 naming the store, not a 500.
    if (!this.synced) throw this.lastFailure ?? new Error("the store's clock could not be read yet");
    return this.localNow() + this.offsetMs;
  }

  /** Difference between the store's clock and the local one, as last read. */
  get skewMs(): number {
    return this.offsetMs;
  }

  private read(): Promise<void> {
    this.reading ??= this.readNow().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async readNow(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const sentAt = this.localNow();
      try {
        const hello = await this.db.command({ hello: 1 });
        const answeredAt = this.localNow();
        // Too slow to tell the time by (MAX_ROUND_TRIP_MS): asked again at once, as the next
        // answer is likely prompt; a second slow one keeps the last offset, or is taken when
        // there is none (a guess beats no clock, as before).
        if (answeredAt - sentAt > MAX_ROUND_TRIP_MS && (attempt === 1 || this.synced)) {
          if (attempt === 1) continue;
          this.readAt = answeredAt;
          return;
        }
        if (hello.localTime instanceof Date) this.offsetMs = hello.localTime.getTime() - (sentAt + answeredAt) / 2;
        this.readAt = answeredAt;
        // A server without localTime (MongoDB and FerretDB both send it) leaves the local clock.
        this.synced = true;
        return;
      } catch (error) {
        // Try again at the next use after RESYNC_MS; until then the last offset stands.
        this.lastFailure = error;
        this.readAt = this.localNow();
        return;
      }
    }
  }
}
