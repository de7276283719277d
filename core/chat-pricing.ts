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

/** What a call used that failed, or was refused before it reached the upstream. */
export const NO_TOKENS: TokenCounts = Object.freeze({ inputTokens: 0, outputTokens: 0 });

export function estimateTokens(characters: number): number {
  return Math.ceil(characters / CHARACTERS_PER_TOKEN);
}

/** Tokens at most per character outside ASCII: CJK text runs about 0.7 to 1.5 tokens a
 * character, four times what 4 characters a token would count. */
const TOKENS_PER_OTHER_CHARACTER = 1.5;

/**
 * The input tokens of a request's text, for its reservation: 4 ASCII characters a token, and
 * TOKENS_PER_OTHER_CHARACTER for the others. Those are counted from the UTF-8 length, without a
 * pass over the text: a CJK character is 3 bytes in 1 UTF-16 unit (an emoji 4 in 2), so the
 * bytes beyond one per unit, halved, count them (an accented Latin letter counts half).
 * `asciiCharactersLeftOut` are not counted (image URLs, priced per image instead).
 */
export function estimateTextTokens(text: string, asciiCharactersLeftOut = 0, bytes = Buffer.byteLength(text)): number {
  const others = (bytes - text.length) / 2;
  const ascii = Math.max(0, text.length - others - asciiCharactersLeftOut);
  return Math.ceil(ascii / CHARACTERS_PER_TOKEN + others * TOKENS_PER_OTHER_CHARACTER);
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
  /** The estimated input tokens (the upstream body's text and its images). */
  promptTokens: number;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  /** Number of choices asked for; each may use the whole output budget. */
  n?: number | null;
  /** The UTF-8 bytes of a `prediction`: OpenAI bills its rejected tokens as output, beyond the
   * output limit, and a token is at least a byte. */
  predictionBytes?: number;
}

/** The output tokens a call may be billed for, and so holds: its limit (never above the
 * model's: a larger one is refused before the call, chat-proxy.ts), else the model's, per
 * choice, plus its prediction's bytes. What is held is what the charge is bounded by: a bound
 * above the hold let a call cost more than the balance that admitted it (a review's prediction
 * of 300 KB and max_tokens of 100 million each did). */
function outputTokenBudget(model: ChatModel, input: ChatHoldInput): number {
  // Both given: the larger, since which one an upstream obeys is its own choice (many
  // OpenAI-compatible servers read only `max_tokens`); held at the smaller, the rest was free.
  // Each is a positive integer when given, so 0 here means neither was.
  const larger = Math.max(input.max_completion_tokens ?? 0, input.max_tokens ?? 0);
  const asked = Math.min(larger > 0 ? larger : model.max_output_tokens, model.max_output_tokens);
  return asked * Math.max(1, input.n ?? 1) + (input.predictionBytes ?? 0);
}

/** The worst case held before a call: the estimated prompt plus the full output budget. */
export function chatHoldTokens(model: ChatModel, input: ChatHoldInput): TokenCounts {
  return { inputTokens: input.promptTokens, outputTokens: outputTokenBudget(model, input) };
}

/**
 * The most a call can have used, whatever its upstream says: input no more tokens than the
 * request's UTF-8 bytes (a BPE token covers at least one byte; a message's few framing tokens
 * are fewer than its JSON's framing bytes) plus its images at the catalog's tokens each (no
 * bound when it holds a file or audio part), output no more than `outputTokens` (what the
 * caller asked for, else the model's limit, per choice). Usage reported
 * beyond it is an upstream's fault, and is charged at this: one bad or hostile report must not
 * be able to take an account's balance (a reported 900 million tokens did). Within it, usage
 * above the hold's estimate is charged as reported.
 */
export function chatUsageCeiling(model: ChatModel, request: { bodyBytes: number; images: number; unboundedParts?: boolean }, outputTokens: number): TokenCounts {
  // A file or audio part is billed by what the provider extracts from it: no bound on input.
  const inputTokens = request.unboundedParts ? Number.POSITIVE_INFINITY : request.bodyBytes + request.images * model.image_input_tokens;
  return { inputTokens, outputTokens };
}

/** `tokens` within `ceiling`, and whether they had to be cut to fit. */
export function withinCeiling(tokens: TokenCounts, ceiling: TokenCounts): { tokens: TokenCounts; cut: boolean } {
  if (tokens.inputTokens <= ceiling.inputTokens && tokens.outputTokens <= ceiling.outputTokens) return { tokens, cut: false };
  return { tokens: { inputTokens: Math.min(tokens.inputTokens, ceiling.inputTokens), outputTokens: Math.min(tokens.outputTokens, ceiling.outputTokens) }, cut: true };
}

/** The price of one image of `model` at the request's quality and size; undefined when the
 * model is priced by quality and size and has no price for these. */
export function imageUnitPriceMicros(model: ImageModel, request: { quality?: string; size?: string }): number | undefined {
  if (!model.prices_per_image_micros) return model.price_per_image_micros;
  return model.prices_per_image_micros[`${request.quality ?? model.default_quality} ${request.size ?? model.default_size}`];
}
