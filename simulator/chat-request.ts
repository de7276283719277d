import { z } from 'zod';

// The parts of an OpenAI chat completion request the simulator acts on. Lenient like the
// OpenAI-compatible vendors: parameters it does not model (temperature, top_p, seed, ...)
// are accepted and ignored; the ones it uses (tools, tool_choice, response_format, stop, the
// output limits, logprobs) are checked so malformed bodies get a realistic 400.

const textPart = z.object({ type: z.literal('text'), text: z.string() });

const message = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  // Content may be a string, an array of parts (text, image_url, ...) or null beside tool calls.
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() })), z.null()]).optional(),
  tool_call_id: z.string().optional(),
});

const functionTool = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});

const namedFunction = z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) });

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  namedFunction,
  // OpenAI's way to narrow the tools for one call while keeping the list (and the prompt cache).
  z.object({ type: z.literal('allowed_tools'), allowed_tools: z.object({ mode: z.enum(['auto', 'required']), tools: z.array(namedFunction).min(1) }) }),
]);

// Structured outputs: the reply is JSON, of the given schema for json_schema.
const responseFormat = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({ name: z.string().min(1), schema: z.record(z.string(), z.unknown()).optional(), strict: z.boolean().nullish() }),
  }),
]);

export const chatCompletionBody = z.object({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  tools: z.array(functionTool).nullish(),
  tool_choice: toolChoice.nullish(),
  response_format: responseFormat.nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  // OpenAI's own bound on choices per call.
  n: z.number().int().min(1).max(128).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  logprobs: z.boolean().nullish(),
  // OpenAI's bound; the likeliest tokens at each place, given only with logprobs.
  top_logprobs: z.number().int().min(0).max(20).nullish(),
}).refine((body) => body.top_logprobs === undefined || body.top_logprobs === null || body.logprobs === true, {
  path: ['top_logprobs'],
  message: 'top_logprobs is only taken with logprobs set to true',
});

export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;
export type ChatMessage = ChatCompletionBody['messages'][number];
export type FunctionTool = NonNullable<ChatCompletionBody['tools']>[number];

/** The text of a message, its text parts joined when content is an array. */
export function messageText(message: ChatMessage): string {
  const { content } = message;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => textPart.safeParse(part))
    .flatMap((parsed) => (parsed.success ? [parsed.data.text] : []))
    .join(' ');
}

export function lastUserText(messages: ChatMessage[]): string {
  const lastUser = messages.findLast((candidate) => candidate.role === 'user');
  return lastUser ? messageText(lastUser) : '';
}
