import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer } from '../helpers/app.ts';
import { validByDocument } from '../helpers/json-schema-judge.ts';
import { startOpenAiStackWithModels, type SimulatorStack } from '../helpers/openai-stack.ts';

// A chat or image body the OpenAPI document calls valid is one the gateway accepts, also when
// the catalog's models differ in what they take: a chat model with a lower output limit than
// another, an image model with its own sizes and qualities and prices for some quality and size
// pairs only. The local catalog has one model of each kind, so Schemathesis's acceptance check
// cannot see this; a helper's review found the document allowing what the gateway refused.
// Each body is judged by the document (JSON Schema 2020-12, by the jsonschema_rs validator that
// Schemathesis brings into the tool environment) and sent to the running gateway: valid there exactly when not a 400.

type Json = Record<string, any>;

const SMALL_CHAT = { id: 'small-chat', kind: 'chat', upstream: 'simulator-openai', upstream_model: 'gpt-4o-mini', owned_by: 'test', tools: true, max_output_tokens: 1_000, price_per_million_input_tokens_micros: 150_000, price_per_million_output_tokens_micros: 600_000 };
const AUDIO_CHAT = { ...SMALL_CHAT, id: 'audio-chat', max_output_tokens: 4_096, audio_as_tokens: true };
const PRICED_IMAGE = {
  id: 'priced-image',
  kind: 'image',
  upstream: 'simulator-openai',
  upstream_model: 'gpt-image-1',
  owned_by: 'test',
  prices_per_image_micros: { 'low 1024x1024': 11_000, 'high 1536x1024': 250_000 },
  default_quality: 'low',
  default_size: '1024x1024',
  sizes: ['1024x1024', '1536x1024'],
  qualities: ['low', 'high'],
};

const messages = [{ role: 'user', content: 'hi' }];
/** [body, what the document and the gateway should both say]: the expectation keeps the list
 * honest (both sides of each rule are tried). */
const CHAT_BODIES: Array<[Json, boolean]> = [
  [{ model: 'small-chat', messages, max_tokens: 1_000 }, true],
  [{ model: 'small-chat', messages, max_tokens: 1_001 }, false],
  [{ model: 'small-chat', messages, max_completion_tokens: 1_001 }, false],
  [{ model: 'small-chat', messages, max_tokens: null }, true],
  [{ model: 'gpt-4o-mini', messages, max_tokens: 1_001 }, true],
  // Audio, taken only by a model whose entry bills it as tokens.
  [{ model: 'gpt-4o-mini', messages, modalities: ['text'], audio: null }, true],
  [{ model: 'gpt-4o-mini', messages, modalities: ['text', 'audio'] }, false],
  [{ model: 'gpt-4o-mini', messages, audio: { voice: 'alloy', format: 'wav' } }, false],
  [{ model: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } }] }] }, false],
  [{ model: 'audio-chat', messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } }] }], modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } }, true],
];
const IMAGE_BODIES: Array<[Json, boolean]> = [
  [{ model: 'priced-image', prompt: 'a' }, true],
  [{ model: 'priced-image', prompt: 'a', quality: null, size: null }, true],
  [{ model: 'priced-image', prompt: 'a', quality: 'high', size: '1536x1024' }, true],
  [{ model: 'priced-image', prompt: 'a', size: '1536x1024' }, false],
  [{ model: 'priced-image', prompt: 'a', quality: 'high' }, false],
  [{ model: 'priced-image', prompt: 'a', size: '1024x1536' }, false],
  [{ model: 'priced-image', prompt: 'a', quality: 'medium' }, false],
  [{ model: 'priced-image', prompt: 'a', quality: 5 }, false],
  [{ model: 'gpt-image-1', prompt: 'a', quality: 'medium', size: '1024x1536' }, true],
];

describe('the OpenAPI document on chat and image bodies, model by model', () => {
  let stack: SimulatorStack;
  let document: Json;
  let key: string;
  before(async () => {
    stack = await startOpenAiStackWithModels('per-model-bodies', [SMALL_CHAT, AUDIO_CHAT, PRICED_IMAGE]);
    document = (await stack.app.inject({ url: '/openapi.json' })).json();
    ({ key } = await stack.newCaller('per-model', 100));
  });
  after(() => stack.close());

  const bodySchema = (route: string): Json => {
    const schema = document.paths[route].post.requestBody.content['application/json'].schema as Json;
    assert.ok(!JSON.stringify(schema).includes('"$ref"'), 'the body schema stands alone');
    return schema;
  };

  for (const [route, bodies] of [
    ['/v1/chat/completions', CHAT_BODIES],
    ['/v1/images/generations', IMAGE_BODIES],
  ] as const) {
    it(`${route}: the document calls a body valid exactly when the gateway takes it`, async () => {
      const byDocument = validByDocument(bodySchema(route), bodies.map(([body]) => body));
      for (const [index, [body, expected]] of bodies.entries()) {
        const answer = await stack.app.inject({ method: 'POST', url: route, headers: bearer(key), payload: body });
        const byGateway = answer.statusCode !== 400;
        assert.equal(byGateway, expected, `the gateway on ${JSON.stringify(body)}: ${answer.statusCode} ${answer.body.slice(0, 200)}`);
        assert.equal(byDocument[index], expected, `the document on ${JSON.stringify(body)}`);
        if (byGateway) assert.equal(answer.statusCode, 200, answer.body.slice(0, 200));
      }
    });
  }
});
