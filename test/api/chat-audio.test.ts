import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer } from '../helpers/app.ts';
import { expectedChatMicros, startOpenAiStackWithModels, type SimulatorStack } from '../helpers/openai-stack.ts';

// Audio in chat calls is refused on a model whose provider bills it at other prices than its
// text tokens (OpenAI's), and passed on, billed as the tokens the upstream counts, on one whose
// catalog entry says `audio_as_tokens` (a self-hosted audio model).

const SELF_HOSTED_AUDIO = {
  id: 'qwen2-audio', kind: 'chat', upstream: 'simulator-openai', upstream_model: 'gpt-4o-mini', owned_by: 'self-hosted',
  tools: false, max_output_tokens: 4096, price_per_million_input_tokens_micros: 150000, price_per_million_output_tokens_micros: 600000,
  audio_as_tokens: true,
};

const withAudio = (model: string) => ({
  model,
  max_tokens: 16,
  modalities: ['text', 'audio'],
  messages: [{ role: 'user', content: [{ type: 'text', text: 'what is said here?' }, { type: 'input_audio', input_audio: { data: 'UklGRiQAAABXQVZF', format: 'wav' } }] }],
});

describe('audio in chat calls', () => {
  let stack: SimulatorStack;
  let key: string;
  let accountId: string;
  before(async () => {
    stack = await startOpenAiStackWithModels('chat-audio', [SELF_HOSTED_AUDIO]);
    ({ key, accountId } = await stack.newCaller('audio'));
  });
  after(() => stack.close());

  const postChat = (body: object) => stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(key), 'content-type': 'application/json' }, payload: JSON.stringify(body) });

  it("is a 400 naming the field on OpenAI's model, before anything is held or sent", async () => {
    const before = await stack.simulatorStats();
    const { modalities: _spoken, ...inputOnly } = withAudio('gpt-4o-mini');
    for (const [body, field] of [[withAudio('gpt-4o-mini'), 'modalities'], [inputOnly, 'messages.0.content.1.type'], [{ ...inputOnly, messages: [{ role: 'user', content: 'hi' }], audio: { voice: 'alloy', format: 'mp3' } }, 'audio']] as const) {
      const response = await postChat(body);
      assert.equal(response.statusCode, 400, response.body);
      assert.equal(response.json().error.param, field);
      assert.match(response.json().error.message, /audio is not offered on 'gpt-4o-mini' here/);
    }
    assert.deepEqual(await stack.simulatorStats(), before);
    assert.deepEqual(await stack.ledgerEntries(accountId), []);
  });

  it('the OpenAPI document names the models that take audio', async () => {
    const document = (await stack.app.inject({ url: '/openapi.json' })).json();
    const text = JSON.stringify(document);
    assert.match(text, /Models taking audio here: qwen2-audio\./);
  });

  it('passes to the upstream on a model billing audio as tokens, and charges the tokens it reports', async () => {
    const before = await stack.simulatorStats();
    const response = await postChat(withAudio(SELF_HOSTED_AUDIO.id));
    assert.equal(response.statusCode, 200, response.body);
    const completion = response.json();
    assert.equal(completion.model, SELF_HOSTED_AUDIO.id);
    assert.equal((await stack.simulatorStats()).chat_requests, before.chat_requests + 1);
    const [record] = await stack.usageRecords(accountId, 1);
    assert.equal(record?.model, SELF_HOSTED_AUDIO.id);
    assert.equal(record?.input_tokens, completion.usage.prompt_tokens);
    assert.equal(record?.spend_micros, expectedChatMicros(completion.usage));
  });
});
