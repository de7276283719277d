import { isObject } from './wire.ts';

// What counts as a chat answer's output, for pricing one the upstream reported no usage for: a
// whole answer's message (chat-proxy.ts) and a stream's deltas as they pass (chunk-translation.ts)
// are read alike. Output is text, a refusal, reasoning, tool and legacy function calls (name and
// arguments) and audio (its transcript as text).

const textLength = (value: unknown): number => (typeof value === 'string' ? value.length : 0);

/** Output characters in a message or a delta. */
export function outputCharacters(part: Record<string, unknown>): number {
  // Reasoning comes as `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama);
  // a provider that fills both with the same text is counted once.
  let characters = textLength(part.content) + textLength(part.refusal) + Math.max(textLength(part.reasoning_content), textLength(part.reasoning));
  if (Array.isArray(part.tool_calls)) {
    for (const call of part.tool_calls) {
      if (isObject(call) && isObject(call.function)) characters += textLength(call.function.name) + textLength(call.function.arguments);
    }
  }
  // A call under the legacy `functions` parameter comes here instead.
  if (isObject(part.function_call)) characters += textLength(part.function_call.name) + textLength(part.function_call.arguments);
  if (isObject(part.audio)) characters += textLength(part.audio.transcript);
  return characters;
}

/** Sound in a message or a delta (its base64 is no measure of tokens, so it is not counted as
 * characters): a stream's chunk of sound alone still counts as a piece of output. */
export function carriesSound(part: Record<string, unknown>): boolean {
  return isObject(part.audio) && textLength(part.audio.data) > 0;
}
