// Cached reads kept fresh without a request ever starting a store read it does not wait for.
// A lookup only marks its entry due (a Set add); every `intervalMs`, a round on its own timer
// hands all due ids to `read` at once, so one query serves them all. Begun from a request, even
// deferred with setImmediate, a read's driver work (0.5 to 1 ms of CPU on an idle process) ran
// before that request's own call upstream was written.
//
// Used by the API key cache (store/api-key-cache.ts) and the rate limiter's account overrides
// (api/services/rate-limits/rate-limiter.ts). A round never overlaps the previous one; what
// `read` does with a failure is its own business (the ids are not marked due again).

export class RefreshRounds<Id> {
  private readonly due = new Set<Id>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly intervalMs: number,
    private readonly read: (ids: Id[]) => Promise<void>,
  ) {}

  /** Reads `id` in the next round. */
  markDue(id: Id): void {
    this.due.add(id);
  }

  /** Starts the rounds (once); the timer does not keep the process alive. */
  start(): void {
    this.timer ??= setInterval(() => void this.runRound(), this.intervalMs).unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round now: every id due so far, unless a round is still running. */
  async runRound(): Promise<void> {
    if (this.running || this.due.size === 0) return;
    const ids = [...this.due];
    this.due.clear();
    this.running = true;
    try {
      await this.read(ids);
    } finally {
      this.running = false;
    }
  }
}
