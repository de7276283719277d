import type { FastifyBaseLogger } from 'fastify';
import type { Collection } from 'mongodb';
import { failureFields } from '../../../core/dependency-errors.ts';
import { RefreshRounds } from '../../../core/refresh-rounds.ts';
import { readOverrides, readOverridesOf, type RateLimitOverrideDocument, type RateLimitOverrides } from '../../../store/rate-limit-overrides.ts';
import type { LimitKind } from './limit-answers.ts';
import type { LimitedCaller } from './rate-limiter.ts';
import { TIMED_OUT, withinWait } from './store-wait.ts';

// Which per-minute limit applies to a caller: the key's own, else its account's override, else
// the configured default. An account's overrides are read once and cached; while the account is
// in use they are read again every REFRESH_MS, in rounds on a timer of their own (one query for
// every account due, core/refresh-rounds.ts), so a change made through another api process (or
// in the store directly) arrives without any request waiting for the store.

/** How old an account's cached overrides get before a round reads them again: an operator who
 * lowers an account's limit (to stop abuse) through one api process has the others apply it
 * within about two of these. A round is one query for every account due, so a second costs
 * little (a review measured 6 to 10 s of the old limit at 5 s). */
const REFRESH_MS = 1_000;

/** How long a forgotten account's round results are checked against when it was forgotten. */
const FORGOTTEN_KEEP_MS = 60_000;

const limitField = { requests: 'requests_per_minute', tokens: 'tokens_per_minute' } as const;

export interface AccountLimitsOptions {
  /** The accounts' overrides (store/rate-limit-overrides.ts). */
  accountOverrides: Collection<RateLimitOverrideDocument>;
  defaults: { requestsPerMinute: number; tokensPerMinute: number };
  log: Pick<FastifyBaseLogger, 'warn'>;
  refreshMs?: number;
  /** The longest a call waits for its account's first read (store-wait.ts). */
  waitMs: number;
}

export class AccountLimits {
  private readonly cached = new Map<string, { limits: RateLimitOverrides | null; readAt: number }>();
  /** First reads under way: calls of an account waiting at once share one (a hung store would
   * otherwise see one per call). */
  private readonly reads = new Map<string, Promise<RateLimitOverrides | null>>();
  /** Reads again the overrides of accounts in use once they are due. */
  private readonly rounds: RefreshRounds<string>;
  private readonly refreshMs: number;
  /** When each account's overrides were last forgotten, until a refresh that started later
   * read them: a round that started before lands nothing for it. */
  private readonly forgottenAt = new Map<string, number>();

  constructor(private readonly options: AccountLimitsOptions) {
    this.refreshMs = options.refreshMs ?? REFRESH_MS;
    this.rounds = new RefreshRounds(this.refreshMs, (ids) => this.refresh(ids));
  }

  /** Stops the rounds (the app is closing). */
  stop(): void {
    this.rounds.stop();
  }

  /** The limit without waiting; undefined when the key sets none and its account's overrides
   * were never read. */
  inMemory(caller: LimitedCaller, kind: LimitKind, now: number): number | undefined {
    const fromKey = caller.rateLimits?.[limitField[kind]];
    if (fromKey) return fromKey;
    const cached = this.cachedOverrides(caller.accountId, now);
    return cached === undefined ? undefined : this.accountOrDefault(kind, cached);
  }

  /** The limit, reading the account's overrides when they were never read. A store too slow to
   * answer in time (hung) leaves this call the defaults; the read goes on, and is kept. */
  async read(caller: LimitedCaller, kind: LimitKind, now: number): Promise<number> {
    const known = this.inMemory(caller, kind, now);
    if (known !== undefined) return known;
    const limits = await withinWait(this.firstRead(caller.accountId, now), this.options.waitMs);
    if (limits === TIMED_OUT) this.options.log.warn({ account: caller.accountId }, 'rate limit store slow to answer; the default limits apply meanwhile');
    return this.accountOrDefault(kind, limits === TIMED_OUT ? null : limits);
  }

  /** Forgets an account's cached overrides (after they were changed, through this process or,
   * as the key change feed reports, another). */
  forget(accountId: string, now = Date.now()): void {
    this.cached.delete(accountId);
    // A read under way may have started before the change: it keeps nothing, nor does a
    // refresh round under way.
    this.reads.delete(accountId);
    // A round is one query: one that started a minute ago has long landed or failed.
    for (const [id, at] of this.forgottenAt) if (now - at > FORGOTTEN_KEEP_MS) this.forgottenAt.delete(id);
    this.forgottenAt.set(accountId, now);
  }

  /** Forgets every account's (the key change feed may have missed changes). */
  forgetAll(now = Date.now()): void {
    for (const accountId of [...this.cached.keys(), ...this.reads.keys()]) this.forget(accountId, now);
  }

  private firstRead(accountId: string, now: number): Promise<RateLimitOverrides | null> {
    const underWay = this.reads.get(accountId);
    if (underWay) return underWay;
    const reading: Promise<RateLimitOverrides | null> = this.readOne(accountId).then((limits) => {
      if (this.reads.get(accountId) !== reading) return limits;
      this.reads.delete(accountId);
      this.cached.set(accountId, { limits, readAt: now });
      // Rounds start with the first account read.
      this.rounds.start();
      return limits;
    });
    this.reads.set(accountId, reading);
    return reading;
  }

  private accountOrDefault(kind: LimitKind, accountLimits: RateLimitOverrides | null): number {
    const fromAccount = accountLimits?.[limitField[kind]];
    if (fromAccount) return fromAccount;
    return kind === 'requests' ? this.options.defaults.requestsPerMinute : this.options.defaults.tokensPerMinute;
  }

  /** The account's overrides once read (undefined before); due for a read in the next round
   * once refreshMs old. */
  private cachedOverrides(accountId: string, now: number): RateLimitOverrides | null | undefined {
    const cached = this.cached.get(accountId);
    if (!cached) return undefined;
    if (now - cached.readAt > this.refreshMs) this.rounds.markDue(accountId);
    return cached.limits;
  }

  /** One round: the due accounts' overrides in one query. A failed round keeps what was read,
   * and the accounts are due again at their next lookup. */
  private async refresh(ids: string[]): Promise<void> {
    const readAt = Date.now();
    try {
      const found = await readOverridesOf(this.options.accountOverrides, ids);
      for (const id of ids) {
        const forgotten = this.forgottenAt.get(id);
        if (forgotten !== undefined && forgotten >= readAt) continue;
        this.forgottenAt.delete(id);
        this.cached.set(id, { limits: found.get(id) ?? null, readAt });
      }
    } catch (error) {
      this.options.log.warn(failureFields(error), 'could not read account rate limits again; keeping those read before');
    }
  }

  private async readOne(accountId: string): Promise<RateLimitOverrides | null> {
    try {
      return await readOverrides(this.options.accountOverrides, accountId);
    } catch (error) {
      this.options.log.warn(failureFields(error), 'could not read account rate limits; using the defaults');
      return null;
    }
  }
}
