import type { TokenCounts } from '../../../core/chat-pricing.ts';

// Lenient readers for the parts of OpenAI's JSON the gateway acts on. Upstream bodies are
// otherwise passed through untouched, so nothing here validates a whole response.

export type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** More tokens than any one call can use: a count above it is an upstream's mistake. */
const MAX_REPORTED_TOKENS = 1_000_000_000;

const isTokenCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= MAX_REPORTED_TOKENS;

/** `usage` of a completion or of the final stream chunk, when it has both token counts as
 * whole numbers. Anything else (12.5, -1, a string) counts as no usage, and the call is priced
 * from its estimate: a price must be whole micro-USD, and a count that cannot be priced must
 * not leave the call's reservation unsettled. */
export function readUsage(value: unknown): TokenCounts | undefined {
  if (!isObject(value) || !isTokenCount(value.prompt_tokens) || !isTokenCount(value.completion_tokens)) return undefined;
  return { inputTokens: value.prompt_tokens, outputTokens: value.completion_tokens };
}
