// Failed console sign-ins, counted so that guessing passwords stays slow: after too many
// failures in a window, further attempts are refused with 429 before any password is hashed.
//
// Three counts, so that one attacker cannot lock a person out: an email from one address (5),
// an address over every email (20, a password sprayed across accounts), and an email from
// every address (100, guesses spread over many addresses). That last one would let anyone
// lock an owner out by failing 100 times from many addresses, so it does not apply at an
// address the email signed in from before (within TRUSTED_FOR_MS): the owner at their usual
// address keeps signing in while someone else guesses elsewhere.
//
// An attempt counts as failed from the moment it is let through, before its password is
// hashed, and is taken back when it succeeds: counted only after the hash (half a second),
// any number of simultaneous attempts all passed the check. Counts live in this process's
// memory: with several api processes, each counts its own.

const SIGN_IN_WINDOW_MS = 15 * 60_000;
const LIMITS = { emailFromAddress: 5, address: 20, email: 100 } as const;
/** Counts kept at most; the oldest go first (an attacker rotating emails cannot grow memory). */
const MAX_COUNTS = 20_000;
/** How long an address an email signed in from stays exempt from that email's count. */
const TRUSTED_FOR_MS = 30 * 24 * 3600_000;
const MAX_TRUSTED = 20_000;

export interface SignInAttempt {
  /** The email as typed, or 'operator' for the admin token form. */
  who: string;
  address: string;
}

/** An attempt let through: counted as failed unless succeeded() takes it back. */
export interface AdmittedAttempt extends SignInAttempt {
  at: number;
}

export class SignInThrottle {
  private readonly failures = new Map<string, number[]>();
  /** When each email last signed in from each address, by `emailFromAddressKey`. */
  private readonly trusted = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Seconds to wait before the attempt may be made (0: it may be made now, and it counts as
   * failed until succeeded() takes it back). */
  admit(attempt: SignInAttempt): { waitSeconds: number } | { admitted: AdmittedAttempt } {
    let waitMs = 0;
    for (const [key, limit] of this.countsOf(attempt)) {
      const recent = this.recent(key);
      if (recent.length >= limit) waitMs = Math.max(waitMs, recent[recent.length - limit]! + SIGN_IN_WINDOW_MS - this.now());
    }
    if (waitMs > 0) return { waitSeconds: Math.ceil(waitMs / 1000) };
    const admitted = { ...attempt, at: this.now() };
    for (const [key] of this.countsOf(attempt)) {
      const recent = this.recent(key);
      recent.push(admitted.at);
      this.failures.delete(key);
      this.failures.set(key, recent);
    }
    while (this.failures.size > MAX_COUNTS) this.failures.delete(this.failures.keys().next().value!);
    return { admitted };
  }

  /** The attempt was not decided (no password could be checked): it no longer counts. */
  takeBack(attempt: AdmittedAttempt): void {
    for (const [key] of this.countsOf(attempt)) {
      const times = this.failures.get(key);
      const index = times?.indexOf(attempt.at) ?? -1;
      if (times && index >= 0) times.splice(index, 1);
    }
  }

  /** The attempt succeeded: it is taken back, its email-and-address count cleared, and the
   * address trusted for the email. */
  succeeded(attempt: AdmittedAttempt): void {
    this.takeBack(attempt);
    const own = this.emailFromAddressKey(attempt);
    this.failures.delete(own);
    this.trusted.delete(own);
    this.trusted.set(own, this.now());
    while (this.trusted.size > MAX_TRUSTED) this.trusted.delete(this.trusted.keys().next().value!);
  }

  private emailFromAddressKey(attempt: SignInAttempt): string {
    return `${attempt.who.toLowerCase()}\n${attempt.address}`;
  }

  private isTrusted(attempt: SignInAttempt): boolean {
    const at = this.trusted.get(this.emailFromAddressKey(attempt));
    return at !== undefined && this.now() - at < TRUSTED_FOR_MS;
  }

  private countsOf(attempt: SignInAttempt): Array<[string, number]> {
    const counts: Array<[string, number]> = [
      [this.emailFromAddressKey(attempt), LIMITS.emailFromAddress],
      [`\n${attempt.address}`, LIMITS.address],
    ];
    if (!this.isTrusted(attempt)) counts.push([`${attempt.who.toLowerCase()}\n`, LIMITS.email]);
    return counts;
  }

  /** The failures of `key` still inside the window, oldest first. */
  private recent(key: string): number[] {
    const since = this.now() - SIGN_IN_WINDOW_MS;
    const times = (this.failures.get(key) ?? []).filter((at) => at > since);
    if (times.length === 0) this.failures.delete(key);
    return times;
  }
}
