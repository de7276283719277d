import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { chatCompletionBodyFor } from '../../api/routes/chat/schemas.ts';
import { upstreamChatRequest } from '../../api/services/openai-proxy/chat-proxy.ts';
import { loadCatalog, type ChatModel } from '../../core/catalog.ts';

// Properties of the chat completion body as the route checks it (api/routes/chat/schemas.ts):
// every OpenAI-shaped request within spec 4.3 and section 8 is accepted with the parameters it
// does not name passed through untouched, and each single mutation out of the limits is
// refused with the first issue at the field at fault (the field a 400 names as `param`).

const SEED = 20_240_907;
const catalog = loadCatalog('config/catalog.local.json', { SIMULATOR_URL: 'http://127.0.0.1:1' });
const schema = chatCompletionBodyFor(catalog);
// The most output tokens a model of the catalog makes: the documented bound of both limits.
const OUTPUT_LIMIT = Math.max(...catalog.all().flatMap((model) => (model.kind === 'chat' ? [model.max_output_tokens] : [])));

const text = fc.string({ maxLength: 40 });
const contentPart = fc.oneof(fc.record({ type: fc.constant('text'), text }), fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: fc.webUrl() }) }));
const content = fc.oneof(text, fc.array(contentPart, { maxLength: 3 }));
// Spec 2.4 by role: text required, except an assistant's (which may carry tool_calls instead);
// a tool result names its call.
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'developer', 'user'), content, name: text }, { requiredKeys: ['role', 'content'] }),
  fc.record({ role: fc.constant('assistant'), content: fc.oneof(content, fc.constant(null)), name: text }, { requiredKeys: ['role'] }),
  fc.record({ role: fc.constant('tool'), content, tool_call_id: text }),
);
const tool = fc.record({
  type: fc.constant('function'),
  function: fc.record(
    {
      name: fc.stringMatching(/^[a-zA-Z0-9_-]{1,64}$/),
      description: text,
      parameters: fc.record({ type: fc.constant('object'), properties: fc.dictionary(fc.stringMatching(/^[a-z]{1,8}$/), fc.record({ type: fc.constant('string') })), required: fc.array(fc.stringMatching(/^[a-z]{1,8}$/), { maxLength: 3 }) }, { requiredKeys: ['type'] }),
    },
    { requiredKeys: ['name'] },
  ),
});
// Parameters this gateway does not name reach the upstream as they are.
const passThrough = fc.record({ seed: fc.integer(), user: text, response_format: fc.record({ type: fc.constantFrom('text', 'json_object') }), logprobs: fc.boolean() }, { requiredKeys: [] });

const validBody = fc
  .record(
    {
      messages: fc.array(message, { minLength: 1, maxLength: 5 }),
      temperature: fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), fc.constant(null)),
      top_p: fc.double({ min: 0, max: 1, noNaN: true }),
      max_tokens: fc.integer({ min: 1, max: OUTPUT_LIMIT }),
      max_completion_tokens: fc.integer({ min: 1, max: OUTPUT_LIMIT }),
      n: fc.integer({ min: 1, max: 128 }),
      stop: fc.oneof(text, fc.array(text, { maxLength: 4 }), fc.constant(null)),
      stream: fc.boolean(),
      stream_options: fc.record({ include_usage: fc.boolean() }),
      tools: fc.array(tool, { maxLength: 3 }),
      service_tier: fc.constantFrom('auto', 'default', null),
      modalities: fc.constantFrom(['text'], ['text', 'audio'], null),
    },
    { requiredKeys: ['messages'] },
  )
  .chain((body) => passThrough.map((extra) => ({ model: 'gpt-4o-mini', ...body, ...extra })));

type Body = Record<string, any>;

/** One way out of the limits, the field it must be refused at, and how to apply it. */
const mutations: Array<[string, (body: Body) => fc.Arbitrary<[Body, string]>]> = [
  // fast-check counts -0 as below 0, but it is 0 (within the limits): hence the filter.
  ['temperature outside 0 to 2', (body) => fc.oneof(fc.double({ min: 2, max: 1e6, minExcluded: true, noNaN: true }), fc.double({ min: -1e6, max: 0, maxExcluded: true, noNaN: true }).filter((value) => value < 0)).map((temperature) => [{ ...body, temperature }, 'temperature'])],
  ['top_p outside 0 to 1', (body) => fc.oneof(fc.double({ min: 1, max: 1e6, minExcluded: true, noNaN: true }), fc.double({ min: -1e6, max: 0, maxExcluded: true, noNaN: true }).filter((value) => value < 0)).map((top_p) => [{ ...body, top_p }, 'top_p'])],
  ['max_tokens not a positive integer', (body) => fc.oneof(fc.integer({ max: 0 }), fc.double({ min: 0.5, max: 1e6, noNaN: true }).filter((value) => !Number.isInteger(value))).map((max_tokens) => [{ ...body, max_tokens }, 'max_tokens'])],
  ['max_completion_tokens above every model\'s limit', (body) => fc.integer({ min: OUTPUT_LIMIT + 1 }).map((max_completion_tokens) => [{ ...body, max_completion_tokens }, 'max_completion_tokens'])],
  ['a service tier the provider bills above or below the standard one', (body) => fc.constantFrom('priority', 'flex', 'scale', 'Priority').map((service_tier) => [{ ...body, service_tier }, 'service_tier'])],
  ['a hosted web search, billed per call beyond the tokens', (body) => fc.constantFrom({}, { search_context_size: 'low' }).map((web_search_options) => [{ ...body, web_search_options }, 'web_search_options'])],
  ['a modality other than text or audio', (body) =>
    fc.tuple(fc.constantFrom<string[]>([], ['text'], ['text', 'audio']), fc.string({ minLength: 1 }).filter((modality) => modality !== 'text' && modality !== 'audio')).map(([known, other]) => [{ ...body, modalities: [...known, other] }, `modalities.${known.length}`])],
  ['n outside 1 to 128', (body) => fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 129 })).map((n) => [{ ...body, n }, 'n'])],
  ['more than 4 stop sequences', (body) => fc.array(text, { minLength: 5, maxLength: 12 }).map((stop) => [{ ...body, stop }, 'stop'])],
  ['no messages', (body) => fc.constant([{ ...body, messages: [] }, 'messages'])],
  ['a message with an unknown role', (body) =>
    fc.tuple(fc.nat({ max: body.messages.length - 1 }), fc.string({ minLength: 1 }).filter((role) => !['system', 'developer', 'user', 'assistant', 'tool', 'function'].includes(role))).map(([index, role]) => {
      const messages = body.messages.map((item: Body, position: number) => (position === index ? { ...item, role } : item));
      return [{ ...body, messages }, `messages.${index}.role`];
    })],
  ['a message whose content is a number', (body) =>
    fc.tuple(fc.nat({ max: body.messages.length - 1 }), fc.integer()).map(([index, content]) => {
      const messages = body.messages.map((item: Body, position: number) => (position === index ? { ...item, content } : item));
      return [{ ...body, messages }, `messages.${index}.content`];
    })],
  ['a user message without content', (body) =>
    fc.nat({ max: body.messages.length - 1 }).map((index) => {
      const messages = body.messages.map((item: Body, position: number) => (position === index ? { role: 'user', name: 'ana' } : item));
      return [{ ...body, messages }, `messages.${index}.content`];
    })],
  ['a tool result that names no tool call', (body) =>
    fc.nat({ max: body.messages.length - 1 }).map((index) => {
      const messages = body.messages.map((item: Body, position: number) => (position === index ? { role: 'tool', content: '{"ok": true}' } : item));
      return [{ ...body, messages }, `messages.${index}.tool_call_id`];
    })],
  ['stream that is not a boolean', (body) => fc.oneof(fc.string(), fc.integer()).map((stream) => [{ ...body, stream }, 'stream'])],
  ['a tool name outside [a-zA-Z0-9_-]{1,64}', (body) =>
    fc.oneof(fc.constant(''), fc.string({ minLength: 65, maxLength: 80, unit: fc.constantFrom('a', 'b') }), fc.stringMatching(/^[a-z]{1,5} [a-z]{1,5}$/)).map((name) => [
      { ...body, tools: [{ type: 'function', function: { name, parameters: { type: 'object' } } }] },
      'tools.0.function.name',
    ])],
  ['a tool of another type', (body) => fc.constantFrom('retrieval', 'code_interpreter', 'file_search').map((type) => [{ ...body, tools: [{ type, function: { name: 'f' } }] }, 'tools.0.type'])],
  ['no model', (body) => fc.constant([Object.fromEntries(Object.entries(body).filter(([field]) => field !== 'model')), 'model'])],
];

describe('chat completion body properties', () => {
  it('accepts every request within the limits and passes unnamed parameters through', () => {
    fc.assert(
      fc.property(validBody, (body: Body) => {
        const parsed = schema.safeParse(body);
        assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
        for (const field of ['seed', 'user', 'response_format', 'logprobs']) {
          if (field in body) assert.deepEqual((parsed.data as Body)[field], body[field], field);
        }
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('sends the upstream the whole body with its own model id, asks for usage on streams, and reserves for all of it', () => {
    const model = { ...(catalog.find('gpt-4o-mini') as ChatModel), upstream_model: 'upstream-mini-2024' };
    fc.assert(
      fc.property(fc.oneof(validBody, validBody.map((body) => ({ ...body, tools: null }))), (body: Body) => {
        const parsed = schema.parse(body);
        const { payload, promptTokens } = upstreamChatRequest(model, parsed);
        const expected: Body = { ...parsed, model: 'upstream-mini-2024' };
        if (parsed.stream === true) expected.stream_options = { ...parsed.stream_options, include_usage: true };
        // As JSON on both sides: what goes over the wire (fast-check makes null-prototype records).
        assert.deepEqual(JSON.parse(payload), JSON.parse(JSON.stringify(expected)));
        // Every character the upstream reads is counted, at 4 a token or more.
        const images = parsed.messages.flatMap((message) => (Array.isArray(message.content) ? message.content : [])).filter((part) => (part as Body).type === 'image_url').length;
        if (images === 0) assert.ok(promptTokens >= Math.ceil(payload.length / 4), `${promptTokens} tokens for ${payload.length} characters`);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  for (const [name, mutate] of mutations) {
    it(`refuses ${name} at that field`, () => {
      fc.assert(
        fc.property(validBody.chain((body) => mutate(body)), ([bad, field]) => {
          const parsed = schema.safeParse(bad);
          assert.equal(parsed.success, false, 'refused');
          assert.equal(parsed.error!.issues[0]!.path.join('.'), field, JSON.stringify(parsed.error!.issues[0]));
        }),
        { seed: SEED, numRuns: 100 },
      );
    });
  }
});
