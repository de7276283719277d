// The callers of this process waiting for a new spend lease of their account, with what each
// needs. Several callers that find the lease short wait for one opening: sized for the one
// that started it, each of the others spent an attempt on a lease too small for it, and each
// replacement shrank (a review counted 5 to 21 affordable calls of 192 refused, on small
// accounts served by two api processes).

/** One waiting caller: what it needs, and whether a lease opened while it waited went to the
 * others. */
interface Waiter {
  needMicros: number;
  lostOpening: boolean;
}

/** A waiting caller's handle. */
export interface WaitingCaller {
  /** A lease opened while it waited was taken by the other waiting callers. */
  lostOpening(): void;
  /** It reserved, or was refused: it counts no more. */
  leave(): void;
}

export class WaitingCallers {
  private readonly waiters = new Map<string, Waiter[]>();

  join(accountId: string, needMicros: number): WaitingCaller {
    const waiters = this.waiters.get(accountId) ?? [];
    const waiter: Waiter = { needMicros, lostOpening: false };
    waiters.push(waiter);
    this.waiters.set(accountId, waiters);
    return {
      lostOpening: () => {
        waiter.lostOpening = true;
      },
      leave: () => {
        waiters.splice(waiters.indexOf(waiter), 1);
        if (waiters.length === 0 && this.waiters.get(accountId) === waiters) this.waiters.delete(accountId);
      },
    };
  }

  /** What the account's waiting callers need together, at least `leastMicros` (the one asking),
   * counting only needs within `boundMicros`: a caller the account cannot serve must not size
   * leases or prolong waits. */
  need(accountId: string, leastMicros: number, boundMicros: number): number {
    let total = 0;
    for (const waiter of this.waiters.get(accountId) ?? []) if (waiter.needMicros <= boundMicros) total += waiter.needMicros;
    return Math.max(leastMicros, total);
  }

  /** Whether a caller of the account still waiting saw a lease opened and taken by the others. */
  anyLostOpening(accountId: string): boolean {
    return (this.waiters.get(accountId) ?? []).some((waiter) => waiter.lostOpening);
  }
}
