// The callers of this process waiting for a new spend lease of their account, with what each
// needs. Several callers that find the lease short wait for one opening: sized for the one
// that started it, each of the others spent an attempt on a lease too small for it, and each
// replacement shrank (a review counted 5 to 21 affordable calls of 192 refused, on small
// accounts served by two api processes).

export class WaitingCallers {
  /** Per account, what each waiting caller needs. */
  private readonly needs = new Map<string, number[]>();

  /** Counts a caller until the returned function is called. */
  join(accountId: string, needMicros: number): () => void {
    const needs = this.needs.get(accountId) ?? [];
    needs.push(needMicros);
    this.needs.set(accountId, needs);
    return () => {
      needs.splice(needs.indexOf(needMicros), 1);
      if (needs.length === 0 && this.needs.get(accountId) === needs) this.needs.delete(accountId);
    };
  }

  /** What the account's waiting callers need together, at least `leastMicros` (the one asking),
   * counting only needs within `boundMicros`: a caller the account cannot serve must not size
   * leases or prolong waits. */
  need(accountId: string, leastMicros: number, boundMicros: number): number {
    let total = 0;
    for (const need of this.needs.get(accountId) ?? []) if (need <= boundMicros) total += need;
    return Math.max(leastMicros, total);
  }
}
