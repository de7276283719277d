// Failed console sign-ins, counted so that guessing passwords stays slow: after too many
// failures in a window, further attempts are refused with 429 before any password is hashed.
//
// Three counts, so that one attacker cannot lock a person out: an email from one address (5),
// an address over every email (20, a password sprayed across accounts), and an email from
// every address (100, guesses spread over many addresses; high enough that someone else's
// failures rarely stop the owner). A sign-in that succeeds clears its email-and-address count.
// Counts live in this process's memory: with several api processes, each counts its own.

const SIGN_IN_WINDOW_MS = 15 * 60_000;
const LIMITS = { emailFromAddress: 5, address: 20, email: 100 } as const;
/** Counts kept at most; the oldest go first (an attacker rotating emails cannot grow memory). */
const MAX_COUNTS = 20_000;

export interface SignInAttempt {
  /** The email as typed, or 'operator' for the admin token form. */
  who: string;
  address: string;
}

export class SignInThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Seconds until the attempt may be made, or 0 when it may be made now. */
  waitSeconds(attempt: SignInAttempt): number {
    let waitMs = 0;
    for (const [key, limit] of this.countsOf(attempt)) {
      const recent = this.recent(key);
      if (recent.length >= limit) waitMs = Math.max(waitMs, recent[recent.length - limit]! + SIGN_IN_WINDOW_MS - this.now());
    }
    return Math.ceil(waitMs / 1000);
  }

  failed(attempt: SignInAttempt): void {
    const now = this.now();
    for (const [key] of this.countsOf(attempt)) {
      const recent = this.recent(key);
      recent.push(now);
      this.failures.delete(key);
      this.failures.set(key, recent);
    }
    while (this.failures.size > MAX_COUNTS) this.failures.delete(this.failures.keys().next().value!);
  }

  succeeded(attempt: SignInAttempt): void {
    this.failures.delete(this.emailFromAddressKey(attempt));
  }

  private emailFromAddressKey(attempt: SignInAttempt): string {
    return `${attempt.who.toLowerCase()}\n${attempt.address}`;
  }

  private countsOf(attempt: SignInAttempt): Array<[string, number]> {
    return [
      [this.emailFromAddressKey(attempt), LIMITS.emailFromAddress],
      [`\n${attempt.address}`, LIMITS.address],
      [`${attempt.who.toLowerCase()}\n`, LIMITS.email],
    ];
  }

  /** The failures of `key` still inside the window, oldest first. */
  private recent(key: string): number[] {
    const since = this.now() - SIGN_IN_WINDOW_MS;
    const times = (this.failures.get(key) ?? []).filter((at) => at > since);
    if (times.length === 0) this.failures.delete(key);
    return times;
  }
}
