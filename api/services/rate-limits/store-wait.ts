// How long a call waits on the rate-limit store before it goes on without it. A block claim or
// an account's limits read takes a few milliseconds; one unanswered after CLAIM_WAIT_MS meets a
// store in trouble (a hung one holds it until the driver gives up, 3 to 5 s), and a chat call,
// which otherwise needs no store at all, must not wait on it. The work goes on, and lands when
// the store answers (rate-limiter.ts, account-limits.ts).

export const CLAIM_WAIT_MS = 500;

export const TIMED_OUT = Symbol('timed out');

/** `work`'s result, or TIMED_OUT once `waitMs` passed without it (it goes on). */
export async function withinWait<T>(work: Promise<T>, waitMs: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<typeof TIMED_OUT>((resolve) => (timer = setTimeout(resolve, waitMs, TIMED_OUT)))]);
  } finally {
    clearTimeout(timer);
  }
}
