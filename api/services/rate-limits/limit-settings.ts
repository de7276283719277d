import type { AccountStore } from '../../../store/accounts.ts';
import type { ApiKeyStore } from '../../../store/api-keys.ts';
import type { RateLimitOverrides } from '../../../store/rate-limit-overrides.ts';
import type { RateLimiter } from './rate-limiter.ts';

// An operator's overrides of the per-minute limits, for the admin API and the console alike.
// A key's own limit wins over its account's, which wins over the configured default; null
// clears an override.

export interface Limits {
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
}

export interface EffectiveLimits {
  requestsPerMinute: number;
  tokensPerMinute: number;
}

/** The configured limits, which apply where neither the key nor its account overrides them. */
export function configuredLimits(config: { RATE_LIMIT_REQUESTS_PER_MINUTE: number; RATE_LIMIT_TOKENS_PER_MINUTE: number }): EffectiveLimits {
  return { requestsPerMinute: config.RATE_LIMIT_REQUESTS_PER_MINUTE, tokensPerMinute: config.RATE_LIMIT_TOKENS_PER_MINUTE };
}

export function normalizedLimits(input: RateLimitOverrides | null | undefined): Limits {
  return { requests_per_minute: input?.requests_per_minute ?? null, tokens_per_minute: input?.tokens_per_minute ?? null };
}

/** What the limiter applies to a key: the key's override, else its account's, else the default. */
export function effectiveLimits(key: RateLimitOverrides | null | undefined, account: RateLimitOverrides | null | undefined, defaults: EffectiveLimits): EffectiveLimits {
  return {
    requestsPerMinute: key?.requests_per_minute ?? account?.requests_per_minute ?? defaults.requestsPerMinute,
    tokensPerMinute: key?.tokens_per_minute ?? account?.tokens_per_minute ?? defaults.tokensPerMinute,
  };
}

export class RateLimitSettings {
  constructor(
    private readonly options: { accounts: AccountStore; apiKeys: ApiKeyStore; limiter: RateLimiter },
  ) {}

  /** False when there is no such account. */
  async setForAccount(accountId: string, limits: Limits): Promise<boolean> {
    if (!(await this.options.accounts.setRateLimits(accountId, limits))) return false;
    // This process applies the change at once; the others once the key change feed reports it
    // (store/accounts.ts records it there), within about a second.
    this.options.limiter.forgetAccount(accountId);
    return true;
  }

  /** Sets a live key's limits. A revoked key's are left alone: it makes no calls, and a 200
   * would tell the operator the limits apply (its models answer the same, api/routes/admin/keys.ts).
   * 'revoked-meanwhile': revoked while the limits were written, which they were. */
  async setForKey(keyId: string, limits: Limits): Promise<'set' | 'missing' | 'revoked' | 'revoked-meanwhile'> {
    const existing = await this.options.apiKeys.find(keyId);
    if (!existing) return 'missing';
    if (existing.revoked_at) return 'revoked';
    const key = await this.options.apiKeys.setRateLimits(keyId, limits);
    if (!key) return 'missing';
    return key.revoked_at ? 'revoked-meanwhile' : 'set';
  }
}
