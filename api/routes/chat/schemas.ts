import { z } from 'zod';
import type { Catalog, ChatModel } from '../../../core/catalog.ts';
import { requiredAs } from '../../../core/characters.ts';
import { VerbatimInteger } from '../../../core/verbatim-integers.ts';
import { modelIdField } from '../model-resolution.ts';

// The OpenAI chat completion request (spec 4.3). Every object is loose: parameters this schema
// does not name (seed, logprobs, response_format, tool_choice, user, ...) reach the upstream
// with their values (core/verbatim-integers.ts keeps integers beyond 2^53 as written), because
// spec 4.3 says unsupported parameters are ignored upstream, not rejected.
// What is checked is what the spec states limits for, and what billing reads.

const contentPart = z.looseObject({ type: z.string({ error: 'is required in every content part' }) });

const content = z.union([z.string(), z.array(contentPart)], { error: requiredAs('a string or an array of content parts') });

// Spec 2.4: a message is a role and its text. An assistant message may come without text (null
// or none) when it carries tool_calls; a tool result names the call it answers.
const message = z.discriminatedUnion(
  'role',
  [
    z.looseObject({ role: z.enum(['system', 'developer', 'user']), content }),
    z.looseObject({ role: z.literal('assistant'), content: z.union([z.string(), z.array(contentPart), z.null()], { error: 'must be a string, an array of content parts or null' }).optional() }),
    z.looseObject({ role: z.literal('tool'), content, tool_call_id: z.string({ error: requiredAs('a string', 'the id of the tool call this answers') }) }),
    // The result of a legacy `function_call` (deprecated by OpenAI, still taken and still in the
    // SDKs' types): without it a `functions` round trip could start here and never finish.
    z.looseObject({
      role: z.literal('function'),
      content: z.union([z.string(), z.null()], { error: requiredAs('a string or null') }),
      name: z.string({ error: requiredAs('a string', 'the name of the function this answers') }),
    }),
  ],
  {
    // The union's one message for both: an element with a role this does not know, and one
    // that is no message at all (null, a bare string), where a list of roles would mislead.
    error: (issue) =>
      typeof issue.input === 'object' && issue.input !== null && !Array.isArray(issue.input)
        ? 'must be one of system, developer, user, assistant, tool, function'
        : 'must be a message: {"role": ..., "content": ...}',
  },
);

/** A JSON schema describing the function's arguments: an object schema. */
const parametersSchema = z.looseObject({
  type: z.literal('object', { error: "must be 'object'" }),
  properties: z.record(z.string(), z.unknown(), { error: 'must be an object' }).optional(),
  required: z.array(z.string(), { error: 'must be an array of property names' }).optional(),
});

const functionTool = z.looseObject({
  type: z.literal('function', { error: "must be 'function'" }),
  function: z.looseObject(
    {
      name: z
        .string({ error: 'is required' })
        .regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, underscores or dashes'),
      description: z.string({ error: 'must be a string' }).optional(),
      parameters: parametersSchema.optional(),
    },
    { error: 'is required: {"name": ..., "parameters": {...}}' },
  ),
});

const modalities = z
  .array(z.enum(['text', 'audio'], { error: "must be 'text' or 'audio'" }), { error: 'must be an array: ["text"] or ["text", "audio"]' })
  .nullish();

/** What the document says of audio: which models take it (catalog entries with
 * `audio_as_tokens`). */
function audioNote(audioModels: string[]): string {
  const taking = audioModels.length > 0 ? `Models taking audio here: ${audioModels.join(', ')}.` : 'No model here takes audio.';
  return `Audio ("audio" here, the \`audio\` object, \`input_audio\` content parts) is a 400 on a model whose provider bills it at other prices than its text tokens. ${taking}`;
}

const positiveInteger = z.number({ error: 'must be a positive integer' }).int('must be a positive integer').positive('must be a positive integer');

export const chatCompletionBody = z.looseObject({
  model: z.string({ error: requiredAs('a string') }).min(1, 'is required'),
  messages: z.array(message, { error: requiredAs('an array of {role, content} messages', 'an array of {role, content} messages') }).min(1, 'must contain at least one message'),
  temperature: z.number({ error: 'must be a number from 0 to 2' }).min(0, 'must be from 0 to 2').max(2, 'must be from 0 to 2').nullish(),
  top_p: z.number({ error: 'must be a number from 0 to 1' }).min(0, 'must be from 0 to 1').max(1, 'must be from 0 to 1').nullish(),
  max_tokens: positiveInteger.nullish(),
  max_completion_tokens: positiveInteger.nullish(),
  n: z.number({ error: 'must be an integer from 1 to 128' }).int('must be an integer from 1 to 128').min(1, 'must be from 1 to 128').max(128, 'must be from 1 to 128').nullish(),
  stop: z
    .union([z.string(), z.array(z.string()).max(4, 'allows at most 4 stop sequences')], { error: 'must be a string or an array of up to 4 strings' })
    .nullish(),
  stream: z.boolean({ error: 'must be a boolean' }).nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean({ error: 'must be a boolean' }).nullish() }, { error: 'must be an object: {"include_usage": true}' }).nullish(),
  tools: z.array(functionTool, { error: 'must be an array of function definitions' }).nullish(),
  // Parameters that change what the provider bills beyond the catalog's token prices: passed
  // through, they had the operator pay a priority tier (about twice the standard price) or a
  // hosted web search per call while the caller paid the catalog's price.
  service_tier: z
    .enum(['auto', 'default'], { error: "must be 'auto' or 'default': this gateway's prices are the provider's standard tier, and it bills 'flex', 'scale' and 'priority' at other prices" })
    .nullish(),
  web_search_options: z.null({ error: 'is not offered here: the provider bills each web search beyond the tokens, which this gateway\'s prices do not cover' }).optional(),
  // Audio (these, and `input_audio` parts) is refused for a model whose catalog entry does not
  // bill it as tokens (api/services/openai-proxy/chat-audio.ts).
  modalities,
  audio: z.looseObject({}, { error: 'must be an object: {"voice": ..., "format": ...}' }).nullish(),
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionBody>;

/** Each chat model's output limit below the largest, for the document only (JSON Schema
 * `if`/`then` on `model`): the route checks it when the model is resolved (chat-proxy.ts), and a
 * body the document calls valid must be one the gateway accepts. */
function outputLimitsPerModel(chatModels: ChatModel[], largest: number): object[] {
  return chatModels
    .filter((model) => model.max_output_tokens < largest)
    .map((model) => ({
      if: { properties: { model: { const: model.id } } },
      then: { properties: { max_tokens: { maximum: model.max_output_tokens }, max_completion_tokens: { maximum: model.max_output_tokens } } },
    }));
}

/** Audio refused, model by model, for the document only (JSON Schema `if`/`then` on `model`):
 * the route refuses it once the model is known (chat-audio.ts) on a model without
 * `audio_as_tokens`, and a body the document calls valid must be one the gateway accepts. */
function audioRulesPerModel(chatModels: ChatModel[]): object[] {
  const noAudioPart = { type: 'array', items: { type: 'object', properties: { type: { not: { const: 'input_audio' } } } } };
  return chatModels
    .filter((model) => !model.audio_as_tokens)
    .map((model) => ({
      if: { properties: { model: { const: model.id } } },
      then: {
        properties: {
          audio: { type: 'null' },
          modalities: { anyOf: [{ type: 'null' }, { type: 'array', items: { const: 'text' } }] },
          messages: { items: { properties: { content: { anyOf: [{ type: 'string' }, { type: 'null' }, noAudioPart] } } } },
        },
      },
    }));
}

/** The body as the route checks and documents it: `model` lists the catalog's chat models, and
 * the output limits go no higher than the largest model's (each model's own is checked when it
 * is resolved, chat-proxy.ts, and documented per model). */
export function chatCompletionBodyFor(catalog: Catalog) {
  const chatModels = catalog.all().filter((model): model is ChatModel => model.kind === 'chat');
  const examples = chatModels[0] ? [{ model: chatModels[0].id, messages: [{ role: 'user', content: 'Write a haiku about rivers.' }], max_tokens: 64 }] : [];
  const largest = Math.max(1, ...chatModels.map((model) => model.max_output_tokens));
  const tooMany = `must be at most ${largest}, the most output tokens a model here makes`;
  // An integer past a double's exact range arrives kept as written (core/verbatim-integers.ts),
  // not as a number: it is too large, not "not a positive integer".
  const outputLimit = z
    .number({ error: (issue) => (issue.input instanceof VerbatimInteger && !issue.input.literal.startsWith('-') ? tooMany : 'must be a positive integer') })
    .int('must be a positive integer')
    .positive('must be a positive integer')
    .max(largest, tooMany)
    .nullish();
  const perModel = [...outputLimitsPerModel(chatModels, largest), ...audioRulesPerModel(chatModels)];
  return chatCompletionBody
    .extend({ model: modelIdField(catalog, 'chat'), max_tokens: outputLimit, max_completion_tokens: outputLimit, modalities: modalities.describe(audioNote(chatModels.filter((model) => model.audio_as_tokens).map((model) => model.id))) })
    .meta({ examples, ...(perModel.length > 0 ? { allOf: perModel } : {}) });
}

// Documents the answer; the route sends the upstream's JSON text, which skips serialization.
export const chatCompletionResponse = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(
    z.looseObject({
      index: z.number().int(),
      message: z.looseObject({ role: z.literal('assistant'), content: z.string().nullable() }),
      finish_reason: z.string().nullable(),
    }),
  ),
  usage: z.looseObject({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() }).optional(),
});

const streamChunk = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion.chunk'),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(z.looseObject({ index: z.number().int(), delta: z.looseObject({}), finish_reason: z.string().nullish() })),
});

// Ends a stream whose upstream failed after the first byte, when no status can change any more.
const streamError = z.object({ error: z.looseObject({ message: z.string(), type: z.string(), code: z.string() }) });

/** A JSON Schema to nest inside another: without the `$schema` that only a root may carry. */
function embeddedJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _root, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' });
  return rest;
}

/** One Server-Sent Event of a streamed completion (OpenAPI 3.1 reads a stream's schema as the
 * schema of each event): a chunk, the closing `[DONE]`, or an error that ends the stream. */
export const chatStreamEvent = z.object({
  event: z.literal('message').optional(),
  data: z.string().meta({
    anyOf: [
      { const: '[DONE]' },
      { contentMediaType: 'application/json', contentSchema: embeddedJsonSchema(z.union([streamChunk, streamError])) },
    ],
  }),
});
