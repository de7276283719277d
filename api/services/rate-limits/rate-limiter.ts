import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import type { Collection } from 'mongodb';
import type { RateLimitBlockStore } from '../../../store/rate-limit-blocks.ts';
import type { RateLimitOverrideDocument, RateLimitOverrides } from '../../../store/rate-limit-overrides.ts';
import { AccountLimits } from './account-limits.ts';
import { limitRefusal, tooLargeRefusal, type LimitKind, type LimitStatus } from './limit-answers.ts';
import { CLAIM_WAIT_MS, TIMED_OUT, withinWait } from './store-wait.ts';
import { WINDOW_MS, WindowAllowance, windowAllowanceId } from './window-allowance.ts';

// Per-key rate limits: requests per minute on every /v1 endpoint, tokens per minute on chat.
// Limits come from the key, else its account, else the configuration. Windows are fixed UTC
// minutes, shared by every API process through the store (window-allowance.ts).
//
// Tokens: a chat call is admitted while its minute has tokens left, and is counted at once for
// the tokens it is sure to use (its prompt estimate), as OpenAI counts a request's estimate when
// it admits it. So calls made together see each other: 50 at once against a limit of 10,000
// admit about as many as their prompts fit, where counting only the usage reported afterwards
// admitted all 50. When the call ends, its count is corrected to the upstream's usage (the
// output added, an estimate above the real prompt given back to this process's allowance): so
// calls admitted together may overshoot the minute by their output.
//
// If the store cannot be reached, or has not answered within CLAIM_WAIT_MS (store-wait.ts), the
// limiter lets requests through and logs it: a store outage should not take down chat calls
// that otherwise need no store at all.
//
// Almost every call finds its minute's allowance in memory with units at hand, so admitting it
// needs no store and no await: the methods answer synchronously then, and return a promise only
// when a block must be claimed or the account's overrides read. On the chat path the async
// version cost about 6 KB of garbage and a few microseconds per call.
//
// Which limit applies (the key's, its account's or the default) is account-limits.ts's.
//
// A new minute's allowance starts empty: its first call would wait for a block claim (a store
// round trip, 2 to 5 ms on FerretDB), once a minute per key and kind. So NEXT_MINUTE_AHEAD_MS
// before each minute ends, a timed round claims the next minute's first block for every
// allowance used in the minute (a block left unused if the key goes quiet is only unspent
// allowance, never more than the limit).

export type { RateLimitOverrides };

export interface LimitedCaller {
  accountId: string;
  keyId: string;
  rateLimits?: RateLimitOverrides | null;
}

/** The tokens a chat call was counted for when admitted, in the allowance that counted them. */
export class TokenCount {
  /** The claim still out when the call was let through (admit): settled once it lands. */
  late: Promise<void> | undefined = undefined;

  constructor(
    readonly allowance: WindowAllowance,
    /** Not readonly: a claim that lands late and fails leaves the call uncounted (admit). */
    public tokens: number,
    /** The minute's tokens as the admission left them (the headers). */
    readonly status: LimitStatus,
  ) {}
}

const NEXT_MINUTE_AHEAD_MS = 3_000;

export interface RateLimiterOptions {
  store: RateLimitBlockStore;
  /** The accounts' overrides (store/rate-limit-overrides.ts). */
  accountOverrides: Collection<RateLimitOverrideDocument>;
  defaults: { requestsPerMinute: number; tokensPerMinute: number };
  log: Pick<FastifyBaseLogger, 'warn'>;
  /** How old an account's overrides get before the next round reads them again. */
  accountLimitsRefreshMs?: number;
  /** Tests shorten CLAIM_WAIT_MS. */
  claimWaitMs?: number;
}

export class RateLimiter {
  private readonly windows = new Map<string, WindowAllowance>();
  /** The allowance made last for each kind, key and minute, whatever its limit. */
  private readonly latestAllowances = new Map<string, WindowAllowance>();
  private readonly limits: AccountLimits;
  private nextMinuteTimer: NodeJS.Timeout | undefined;
  private currentWindow = -1;
  private closed = false;

  private readonly claimWaitMs: number;

  constructor(private readonly options: RateLimiterOptions) {
    this.claimWaitMs = options.claimWaitMs ?? CLAIM_WAIT_MS;
    this.limits = new AccountLimits({
      accountOverrides: options.accountOverrides,
      defaults: options.defaults,
      log: options.log,
      waitMs: this.claimWaitMs,
      ...(options.accountLimitsRefreshMs === undefined ? {} : { refreshMs: options.accountLimitsRefreshMs }),
    });
  }

  /** Stops the refresh rounds (the app is closing). */
  close(): void {
    this.limits.stop();
    clearTimeout(this.nextMinuteTimer);
    this.nextMinuteTimer = undefined;
    this.closed = true;
  }

  /** Claims the next minute's first block for every allowance of the minute `now` is in. */
  async claimNextMinute(now = Date.now()): Promise<void> {
    const window = Math.floor(now / WINDOW_MS);
    const claims: Promise<boolean>[] = [];
    for (const allowance of [...this.windows.values()]) {
      // Only allowances calls used: one claimed ahead and never used leads to no further claim.
      if (allowance.window !== window || !allowance.used) continue;
      const next = this.windowAllowance(allowance.kind, allowance.keyId, window + 1, allowance.limit);
      claims.push(next.claimFirstBlockAhead());
    }
    for (const claim of await Promise.allSettled(claims)) {
      if (claim.status === 'rejected') this.options.log.warn(failureFields(claim.reason), "rate limit store unreachable; the next minute's first calls will claim their blocks");
    }
  }

  /** Runs claimNextMinute NEXT_MINUTE_AHEAD_MS before every minute ends, from the first
   * allowance on (an allowance made later than that in its minute waits for the next one). */
  private scheduleNextMinute(): void {
    if (this.nextMinuteTimer || this.closed) return;
    const now = Date.now();
    let at = (Math.floor(now / WINDOW_MS) + 1) * WINDOW_MS - NEXT_MINUTE_AHEAD_MS;
    if (at <= now) at += WINDOW_MS;
    this.nextMinuteTimer = setTimeout(() => {
      this.nextMinuteTimer = undefined;
      void this.claimNextMinute().finally(() => this.scheduleNextMinute());
    }, at - now).unref();
  }

  /** Counts one request; 429 with Retry-After and the request headers when over the limit. */
  admitRequest(caller: LimitedCaller, now = Date.now()): LimitStatus | Promise<LimitStatus> {
    const allowance = this.allowanceInMemory(caller, 'requests', now);
    if (allowance?.takeAtHand(1)) return this.status(allowance, now);
    return this.admit(allowance ?? this.allowance(caller, 'requests', now), 'requests', now, (claimed) => claimed.take(1)).then(({ allowance: claimed }) => this.status(claimed, now));
  }

  /** Admits a chat call while its key's minute has tokens left, and counts `expectedTokens`
   * against the minute at once; settleTokens() corrects that to the call's usage. The status is
   * read after the count, so the headers show what is left for the next call. A call whose
   * `leastTokens` are more than the whole minute is refused for good (tooLarge). */
  admitTokens(caller: LimitedCaller, expectedTokens: number, now = Date.now(), leastTokens = expectedTokens): TokenCount | Promise<TokenCount> {
    const allowance = this.allowanceInMemory(caller, 'tokens', now);
    if (allowance && leastTokens > allowance.limit) throw tooLargeRefusal(leastTokens, this.status(allowance, now));
    if (allowance?.hasAtHand(1)) {
      allowance.spend(expectedTokens, this.tokensNotCounted);
      return new TokenCount(allowance, expectedTokens, this.status(allowance, now));
    }
    return this.admit(allowance ?? this.allowance(caller, 'tokens', now), 'tokens', now, (claimed) => {
      if (leastTokens > claimed.limit) throw tooLargeRefusal(leastTokens, this.status(claimed, now));
      return claimed.spendOnceAvailable(expectedTokens, this.tokensNotCounted);
    }).then(({ allowance: claimed, counted, late }) => {
      const count = new TokenCount(claimed, counted ? expectedTokens : 0, this.status(claimed, now));
      // Counted only if the claim still out spends them when it lands.
      if (late) count.late = late.then((spent) => void (spent || (count.tokens = 0)));
      return count;
    });
  }

  /** The slow path: the allowance found in memory (no units at hand) or being read, and `claim`
   * run on it; refused when the minute's blocks are gone. `counted` is false when the store
   * could not be reached: the call is let through uncounted. A claim the store has not answered
   * within claimWaitMs lets the call through too, counted once it lands (`late`). */
  private async admit(
    found: WindowAllowance | Promise<WindowAllowance>,
    kind: LimitKind,
    now: number,
    claim: (allowance: WindowAllowance) => Promise<boolean>,
  ): Promise<{ allowance: WindowAllowance; counted: boolean; late?: Promise<boolean> }> {
    const allowance = await found;
    try {
      const claimed = claim(allowance);
      const answer = await withinWait(claimed, this.claimWaitMs);
      if (answer === TIMED_OUT) {
        this.options.log.warn({ kind, waitedMs: this.claimWaitMs }, 'rate limit store slow to answer; let through');
        const late = claimed.then(
          (spent) => {
            if (!spent) this.options.log.warn({ kind }, "a call let through while the rate limit store was slow came past the minute's limit");
            return spent;
          },
          (error: unknown) => {
            this.options.log.warn({ ...failureFields(error), kind }, 'rate limit store unreachable; a call let through was not counted');
            return false;
          },
        );
        return { allowance, counted: true, late };
      }
      if (answer) return { allowance, counted: true };
    } catch (error) {
      // A refusal from the claim itself (a call larger than the whole minute) is no outage.
      if (error instanceof GatewayError) throw error;
      this.options.log.warn({ ...failureFields(error), kind }, 'rate limit store unreachable; let through');
      return { allowance, counted: false };
    }
    throw limitRefusal(kind, this.status(allowance, now));
  }

  /** Corrects a call's count from admission to the tokens it used. Within the minute that
   * admitted it (and its limit unchanged), the difference is taken, or given back. Otherwise
   * what it used beyond its count is spent in the minute it is reported in: a stream admitted at
   * :59 that ends in the next minute counts the rest there (in the minute that admitted it,
   * whose allowance is usually gone by then, it would never be counted). */
  settleTokens(caller: LimitedCaller, admitted: TokenCount, usedTokens: number, now = Date.now()): void {
    // After a claim still out: what it counted (or not) is known only once it lands, and giving
    // back units it never took would hand out more than the minute's blocks.
    if (admitted.late) {
      const late = admitted.late;
      admitted.late = undefined;
      void late.then(() => this.settleTokens(caller, admitted, usedTokens, now));
      return;
    }
    const { allowance, tokens } = admitted;
    if (allowance.window === Math.floor(now / WINDOW_MS) && this.latestAllowances.get(allowance.minuteId) === allowance) {
      if (usedTokens !== tokens) allowance.spend(usedTokens - tokens, this.tokensNotCounted);
      return;
    }
    this.spendTokens(caller, usedTokens - tokens, now);
  }

  /** Spends tokens in the minute of `now`. */
  private spendTokens(caller: LimitedCaller, tokens: number, now: number): void {
    if (tokens <= 0) return;
    const allowance = this.allowanceInMemory(caller, 'tokens', now);
    if (allowance) return allowance.spend(tokens, this.tokensNotCounted);
    this.allowance(caller, 'tokens', now).then((claimed) => claimed.spend(tokens, this.tokensNotCounted), this.tokensNotCounted);
  }

  // Made once, not per call.
  private readonly tokensNotCounted = (error: unknown) => this.options.log.warn(failureFields(error), 'rate limit store unreachable; tokens not counted');

  private status(allowance: WindowAllowance, now: number): LimitStatus {
    return { limit: allowance.limit, remaining: allowance.remaining, resetMs: allowance.endsAt - now };
  }

  private async allowance(caller: LimitedCaller, kind: LimitKind, now: number): Promise<WindowAllowance> {
    return this.allowanceFor(caller, kind, now, await this.limits.read(caller, kind, now));
  }

  /** The allowance without waiting, or undefined while the account's overrides are unread. */
  private allowanceInMemory(caller: LimitedCaller, kind: LimitKind, now: number): WindowAllowance | undefined {
    const limit = this.limits.inMemory(caller, kind, now);
    return limit === undefined ? undefined : this.allowanceFor(caller, kind, now, limit);
  }

  private allowanceFor(caller: LimitedCaller, kind: LimitKind, now: number, limit: number): WindowAllowance {
    const window = Math.floor(now / WINDOW_MS);
    if (window > this.currentWindow) {
      // Allowances of past minutes are never asked again: drop them with the minute.
      for (const [id, allowance] of this.windows) if (allowance.window < window) this.windows.delete(id);
      for (const [id, allowance] of this.latestAllowances) if (allowance.window < window) this.latestAllowances.delete(id);
      this.currentWindow = window;
    }
    const allowance = this.windowAllowance(kind, caller.keyId, window, limit);
    allowance.used = true;
    return allowance;
  }

  private windowAllowance(kind: LimitKind, keyId: string, window: number, limit: number): WindowAllowance {
    const id = windowAllowanceId(kind, keyId, window, limit);
    let allowance = this.windows.get(id);
    if (!allowance) {
      // The limit changed within the minute: the new allowance starts past what the last one
      // this process used saw used. (Another process, or this one restarted, that had no
      // allowance of the key this minute starts from 0.)
      const before = this.latestAllowances.get(`${kind}:${keyId}:${window}`);
      allowance = new WindowAllowance(this.options.store, kind, keyId, window, limit, before?.usedUnits ?? 0);
      this.windows.set(id, allowance);
      this.scheduleNextMinute();
    }
    // Almost every call finds its allowance the latest already: one lookup, no string built.
    const latest = this.latestAllowances.get(allowance.minuteId);
    if (latest !== allowance) {
      // The limit went back to one used earlier this minute (10, then 20, then 10 again): what
      // was used under the other since counts against this one too.
      if (latest) allowance.catchUp(latest.usedUnits);
      this.latestAllowances.set(allowance.minuteId, allowance);
    }
    return allowance;
  }

  /** Forgets an account's cached overrides (after they were changed, here or in another
   * process); null forgets every account's. */
  forgetAccount(accountId: string | null): void {
    if (accountId === null) this.limits.forgetAll();
    else this.limits.forget(accountId);
  }
}
