import type { ChatModel, ImageModel } from './catalog.ts';

// Prices of chat completions and images in integer micro-USD. Catalog prices are per million
// tokens, so a single call usually costs a fraction of a micro-USD per token: every price is
// rounded up to a whole micro-USD once, over the whole call, never per token.

const TOKENS_PER_PRICE_UNIT = 1_000_000n;

/** A rough tokenizer-free count, ~4 characters per token, used only to size holds and to price
 * what a cancelled stream delivered. */
export const CHARACTERS_PER_TOKEN = 4;

export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
}

export function estimateTokens(characters: number): number {
  return Math.ceil(characters / CHARACTERS_PER_TOKEN);
}

/** inputTokens × input price + outputTokens × output price, per million, rounded up. */
export function chatPriceMicros(model: ChatModel, tokens: TokenCounts): number {
  // BigInt keeps the product exact before the single division.
  const numerator =
    BigInt(Math.max(0, tokens.inputTokens)) * BigInt(model.price_per_million_input_tokens_micros) +
    BigInt(Math.max(0, tokens.outputTokens)) * BigInt(model.price_per_million_output_tokens_micros);
  const whole = numerator / TOKENS_PER_PRICE_UNIT;
  return Number(numerator % TOKENS_PER_PRICE_UNIT === 0n ? whole : whole + 1n);
}

export interface ChatHoldInput {
  /** Characters of everything the upstream reads as prompt (messages and tool definitions). */
  promptCharacters: number;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  /** Number of choices asked for; each may use the whole output budget. */
  n?: number | null;
}

/** The output tokens a call may use at most: the caller's limit, never above the model's own. */
export function outputTokenBudget(model: ChatModel, input: ChatHoldInput): number {
  const asked = input.max_completion_tokens ?? input.max_tokens ?? model.max_output_tokens;
  return Math.min(asked, model.max_output_tokens) * Math.max(1, input.n ?? 1);
}

/** The worst case held before a call: the estimated prompt plus the full output budget. */
export function chatHoldTokens(model: ChatModel, input: ChatHoldInput): TokenCounts {
  return { inputTokens: estimateTokens(input.promptCharacters), outputTokens: outputTokenBudget(model, input) };
}

export function imagePriceMicros(model: ImageModel, images: number): number {
  return model.price_per_image_micros * images;
}
