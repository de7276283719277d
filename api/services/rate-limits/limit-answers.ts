import { GatewayError } from '../../../core/errors.ts';

// What a rate limit tells the caller: OpenAI's x-ratelimit-* headers on every /v1 answer, and
// the 429s (rate-limiter.ts decides when).

export interface LimitStatus {
  limit: number;
  remaining: number;
  /** Milliseconds until the window starts again. */
  resetMs: number;
}

export type LimitKind = 'requests' | 'tokens';

/** OpenAI's duration format for reset headers: "1s", "59s", "1m0s" never needed inside a minute. */
export function resetHeaderValue(resetMs: number): string {
  return `${Math.max(1, Math.ceil(resetMs / 1_000))}s`;
}

// Written out per kind: an object literal with fixed names is built faster than one with computed
// names, and every /v1 request builds one or two of these.
export function limitHeaders(kind: LimitKind, status: LimitStatus): Record<string, string> {
  const limit = String(status.limit);
  const remaining = String(status.remaining);
  const reset = resetHeaderValue(status.resetMs);
  if (kind === 'requests') return { 'x-ratelimit-limit-requests': limit, 'x-ratelimit-remaining-requests': remaining, 'x-ratelimit-reset-requests': reset };
  return { 'x-ratelimit-limit-tokens': limit, 'x-ratelimit-remaining-tokens': remaining, 'x-ratelimit-reset-tokens': reset };
}

/** A chat call whose prompt alone, counted at its least (`leastTokens`: text only, 4
 * characters a token), is more than its key's whole minute: no wait would admit it, so it is
 * refused at once and told not to retry (OpenAI's "Request too large"). Before, it was
 * admitted whenever a minute was fresh, and overdrew that minute alone. */
export function tooLargeRefusal(leastTokens: number, status: LimitStatus): GatewayError {
  return new GatewayError(
    'rate_limit_exceeded',
    `Request too large: its prompt is at least about ${leastTokens} tokens, and this key may use ${status.limit} tokens per minute. Shorten the messages, or ask the operator for a higher limit.`,
    undefined,
    { 'x-should-retry': 'false', ...limitHeaders('tokens', status) },
  );
}

/** The 429 of a key whose minute is used up. */
export function limitRefusal(kind: LimitKind, status: LimitStatus): GatewayError {
  const unit = kind === 'requests' ? 'requests' : 'tokens';
  return new GatewayError(
    'rate_limit_exceeded',
    `Rate limit reached: this key may use ${status.limit} ${unit} per minute. Retry after ${resetHeaderValue(status.resetMs)}.`,
    undefined,
    { 'retry-after': String(Math.max(1, Math.ceil(status.resetMs / 1_000))), ...limitHeaders(kind, status) },
  );
}
