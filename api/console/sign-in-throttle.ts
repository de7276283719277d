import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ObjectId } from 'mongodb';
import type { SignInFailureStore } from '../../store/sign-in-failures.ts';

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
// any number of simultaneous attempts all passed the check. The counts are in the store
// (store/sign-in-failures.ts), shared by every api process: an attempt is recorded first and
// then the counts read, so of attempts made at once, wherever, at most the limit get through
// (simultaneous ones may all be refused, never all let through). A refused attempt is not
// recorded: waiting out the window is enough.

const SIGN_IN_WINDOW_MS = 15 * 60_000;
const LIMITS = { emailFromAddress: 5, address: 20, email: 100 } as const;
/** How long an address an email signed in from stays exempt from that email's count. */
const TRUSTED_FOR_MS = 30 * 24 * 3600_000;
/** Pauses before deleting an attempt's record again when the store failed to. */
const FORGET_RETRY_MS = [1_000, 5_000, 30_000];

export interface SignInAttempt {
  /** The email as typed, or 'operator' for the admin token form. */
  who: string;
  address: string;
}

/** An attempt let through: counted as failed unless succeeded() takes it back. */
export interface AdmittedAttempt extends SignInAttempt {
  id: ObjectId;
}

export class SignInThrottle {
  constructor(
    private readonly store: SignInFailureStore,
    /** The clock the attempts are timed by; tests bring their own. */
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds to wait before the attempt may be made (0: it may be made now, and it counts as
   * failed until succeeded() or takeBack() takes it back). */
  async admit(attempt: SignInAttempt): Promise<{ waitSeconds: number } | { admitted: AdmittedAttempt }> {
    const now = this.now();
    const since = new Date(now - SIGN_IN_WINDOW_MS);
    this.store.pruneNowAndThen(now, since, new Date(now - TRUSTED_FOR_MS));
    const counts = await this.countsOf(attempt, now);
    const id = await this.store.add(counts.map(([count]) => count), new Date(now));
    // Each count's newest attempts, this one among them: one more than the limit means over.
    const newest = await Promise.all(counts.map(([count, limit]) => this.store.newest(count, since, limit + 1)));
    let waitMs = 0;
    counts.forEach(([, limit], index) => {
      const times = newest[index]!;
      // Until the limit-th newest attempt besides this one leaves the window.
      if (times.length > limit) waitMs = Math.max(waitMs, times[limit]!.getTime() + SIGN_IN_WINDOW_MS - now, 1);
    });
    if (waitMs === 0) return { admitted: { ...attempt, id } };
    await this.forget(id);
    return { waitSeconds: Math.ceil(waitMs / 1000) };
  }

  /** The attempt was not decided (no password could be checked): it no longer counts. */
  async takeBack(attempt: AdmittedAttempt): Promise<void> {
    await this.forget(attempt.id);
  }

  /** Deletes an attempt's record; if the store fails right then (it was there a moment ago),
   * again in the background, so that a blip does not leave it counted as a failure. */
  private async forget(id: ObjectId): Promise<void> {
    const attempt = async (retries: readonly number[]): Promise<void> => {
      try {
        await this.store.remove(id);
      } catch {
        const [pauseMs, ...rest] = retries;
        if (pauseMs !== undefined) setTimeout(() => void attempt(rest), pauseMs).unref();
      }
    };
    await attempt(FORGET_RETRY_MS);
  }

  /** The attempt succeeded: it is taken back, its email-and-address count cleared, and the
   * address trusted for the email. */
  async succeeded(attempt: AdmittedAttempt): Promise<void> {
    const own = this.emailFromAddress(attempt);
    // The attempt itself belongs to that count: clearing it takes the attempt back too.
    await Promise.all([this.store.clear(own), this.store.trustFrom(own, new Date(this.now()))]);
  }

  /** The counts the attempt belongs to, with their limits. */
  private async countsOf(attempt: SignInAttempt, now: number): Promise<Array<[string, number]>> {
    const counts: Array<[string, number]> = [
      [this.emailFromAddress(attempt), LIMITS.emailFromAddress],
      [this.store.digest(`\n${attempt.address}`), LIMITS.address],
    ];
    const trustedSince = await this.store.trustedSince(this.emailFromAddress(attempt));
    if (trustedSince === null || now - trustedSince.getTime() >= TRUSTED_FOR_MS) counts.push([this.store.digest(`${attempt.who.toLowerCase()}\n`), LIMITS.email]);
    return counts;
  }

  private emailFromAddress(attempt: SignInAttempt): string {
    return this.store.digest(`${attempt.who.toLowerCase()}\n${attempt.address}`);
  }
}

function tooManyFailures(seconds: number): string {
  const minutes = Math.ceil(seconds / 60);
  return `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
}

/** The attempt let through (counted as failed until it succeeds), or the refusal's words when
 * it must wait after repeated failures (Retry-After set on `reply`). For the sign-in forms and
 * the holder's password form, whose current password is as much a guess. */
export async function admitOrRefuse(throttle: SignInThrottle, attempt: SignInAttempt, request: FastifyRequest, reply: FastifyReply): Promise<{ admitted: AdmittedAttempt } | { refusal: string }> {
  const decision = await throttle.admit(attempt);
  if ('admitted' in decision) return decision;
  request.log.warn({ operator: attempt.who === 'operator' }, 'console sign-in throttled after repeated failures');
  reply.header('retry-after', String(decision.waitSeconds));
  return { refusal: tooManyFailures(decision.waitSeconds) };
}
