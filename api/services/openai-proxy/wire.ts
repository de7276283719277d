import type { TokenCounts } from '../../../core/chat-pricing.ts';

// Lenient readers for the parts of OpenAI's JSON the gateway acts on. Upstream bodies are
// otherwise passed through untouched, so nothing here validates a whole response.

export type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `usage` of a completion or of the final stream chunk, when it has both token counts. */
export function readUsage(value: unknown): TokenCounts | undefined {
  if (!isObject(value) || typeof value.prompt_tokens !== 'number' || typeof value.completion_tokens !== 'number') return undefined;
  return { inputTokens: value.prompt_tokens, outputTokens: value.completion_tokens };
}
