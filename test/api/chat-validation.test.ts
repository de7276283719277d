import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// Request validation of POST /v1/chat/completions: a 400 that names the offending field, before
// any money is held or any upstream is asked.

const valid = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] };

const cases: Array<{ name: string; body: unknown; field: string; says?: string }> = [
  { name: 'model missing', body: { messages: valid.messages }, field: 'model' },
  { name: 'messages missing', body: { model: 'gpt-4o-mini' }, field: 'messages' },
  { name: 'messages empty', body: { ...valid, messages: [] }, field: 'messages' },
  { name: 'messages one object, not an array', body: { ...valid, messages: { role: 'user', content: 'hi' } }, field: 'messages' },
  { name: 'model empty', body: { ...valid, model: '' }, field: 'model' },
  { name: 'unknown role', body: { ...valid, messages: [{ role: 'robot', content: 'hi' }] }, field: 'messages.0.role' },
  { name: 'a message that is null', body: { ...valid, messages: [null] }, field: 'messages.0', says: 'must be a message: {"role": ..., "content": ...}' },
  { name: 'a message that is a bare string', body: { ...valid, messages: ['hi'] }, field: 'messages.0', says: 'must be a message' },
  { name: 'stream_options a string', body: { ...valid, stream: true, stream_options: 'x' }, field: 'stream_options', says: 'must be an object: {"include_usage": true}' },
  { name: 'function result without a name', body: { ...valid, messages: [{ role: 'function', content: 'sunny' }] }, field: 'messages.0.name' },
  { name: 'content a number', body: { ...valid, messages: [{ role: 'user', content: 42 }] }, field: 'messages.0.content' },
  { name: 'temperature above 2', body: { ...valid, temperature: 2.1 }, field: 'temperature' },
  { name: 'temperature below 0', body: { ...valid, temperature: -0.1 }, field: 'temperature' },
  { name: 'top_p above 1', body: { ...valid, top_p: 1.5 }, field: 'top_p' },
  { name: 'max_tokens zero', body: { ...valid, max_tokens: 0 }, field: 'max_tokens' },
  { name: 'max_tokens fractional', body: { ...valid, max_tokens: 10.5 }, field: 'max_tokens' },
  { name: 'max_completion_tokens negative', body: { ...valid, max_completion_tokens: -3 }, field: 'max_completion_tokens' },
  { name: 'five stop sequences', body: { ...valid, stop: ['a', 'b', 'c', 'd', 'e'] }, field: 'stop' },
  { name: 'stop a number', body: { ...valid, stop: 7 }, field: 'stop' },
  { name: 'stream a string', body: { ...valid, stream: 'yes' }, field: 'stream' },
  // Billed by the provider beyond the catalog's token prices.
  { name: 'the priority service tier', body: { ...valid, service_tier: 'priority' }, field: 'service_tier', says: "must be 'auto' or 'default'" },
  { name: 'a hosted web search', body: { ...valid, web_search_options: {} }, field: 'web_search_options', says: 'is not offered here' },
  // Audio, billed by OpenAI at other prices than the catalog's text tokens (chat-audio.test.ts
  // for a model whose entry bills it as tokens).
  { name: 'a spoken answer', body: { ...valid, modalities: ['text', 'audio'] }, field: 'modalities', says: "audio is not offered on 'gpt-4o-mini' here" },
  { name: 'a modality nobody offers', body: { ...valid, modalities: ['text', 'smell'] }, field: 'modalities.1', says: "must be 'text' or 'audio'" },
  { name: 'a voice for the answer', body: { ...valid, audio: { voice: 'alloy', format: 'wav' } }, field: 'audio', says: 'audio is not offered' },
  {
    name: 'audio input',
    body: { ...valid, messages: [{ role: 'user', content: 'hi' }, { role: 'user', content: [{ type: 'text', text: 'what is said?' }, { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } }] }] },
    field: 'messages.1.content.1.type',
    says: 'the provider bills audio in and out at other prices',
  },
  { name: 'tool of another type', body: { ...valid, tools: [{ type: 'retrieval', function: { name: 'x' } }] }, field: 'tools.0.type' },
  { name: 'tool without a name', body: { ...valid, tools: [{ type: 'function', function: { parameters: { type: 'object' } } }] }, field: 'tools.0.function.name' },
  {
    name: 'tool parameters not an object schema',
    body: { ...valid, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] },
    field: 'tools.0.function.parameters.type',
  },
  {
    name: 'tool required not an array',
    body: { ...valid, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', required: 'city' } } }] },
    field: 'tools.0.function.parameters.required',
  },
];

describe('POST /v1/chat/completions validation', () => {
  let stack: SimulatorStack;
  let key: string;
  before(async () => {
    stack = await startOpenAiStack('chat-validation');
    ({ key } = await stack.newCaller('validation'));
  });
  after(() => stack.close());

  /** POST /v1/chat/completions with the caller's key: a body as an object, or as JSON text. */
  const postChat = (payload: object | string, callerKey = key) =>
    stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(callerKey), 'content-type': 'application/json' }, payload });

  for (const { name, body, field, says } of cases) {
    it(`400 naming '${field}': ${name}`, async () => {
      const response = await postChat(body as object);
      assert.equal(response.statusCode, 400, response.body);
      const { error } = response.json();
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.param, field);
      assert.ok(error.message.includes(`'${field}'`), error.message);
      if (says) assert.ok(error.message.includes(says), error.message);
    });
  }

  it("modalities [\"text\"] (what every model answers) is taken", async () => {
    const response = await postChat({ ...valid, modalities: ['text'] });
    assert.equal(response.statusCode, 200, response.body);
    assert.equal(response.json().object, 'chat.completion');
  });

  it('a chat body takes a photo inline as a base64 data URL, past BODY_LIMIT_BYTES, up to CHAT_BODY_LIMIT_BYTES', async () => {
    // About a phone photo: 3 MB of bytes, 4 MB as base64 (it was a 413 at the 1 MiB limit).
    const photo = `data:image/jpeg;base64,${randomBytes(3 * 1_048_576).toString('base64')}`;
    const chat = (text: string) => JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: [{ type: 'text', text }, { type: 'image_url', image_url: { url: photo } }] }] });
    assert.ok(Buffer.byteLength(chat('what is in this photo?')) > stack.config.BODY_LIMIT_BYTES * 4);
    const answered = await postChat(chat('what is in this photo?'));
    assert.equal(answered.statusCode, 200, answered.body);
    assert.equal(answered.json().object, 'chat.completion');

    const limit = stack.config.CHAT_BODY_LIMIT_BYTES;
    const over = await postChat(chat('x'.repeat(limit)));
    assert.equal(over.statusCode, 413);
    assert.equal(over.json().error.message, `The request body is larger than the limit of ${limit} bytes.`);
    // Other routes keep the general limit.
    const video = await stack.app.inject({ method: 'POST', url: '/v1/video/generations', headers: { ...bearer(key), 'content-type': 'application/json' }, payload: JSON.stringify({ model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'image_url', image_url: { url: photo } }] } }) });
    assert.equal(video.statusCode, 413);
    assert.match(video.json().error.message, new RegExp(`limit of ${stack.config.BODY_LIMIT_BYTES} bytes`));
  });

  it('accepts the developer and tool roles, null content beside tool calls, and nulls for optional numbers', async () => {
    const response = await postChat({
      model: 'gpt-4o-mini',
      temperature: null,
      max_tokens: null,
      messages: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'weather?' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'w', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      ],
    });
    assert.equal(response.statusCode, 200, response.body);
    assert.match(response.json().choices[0].message.content, /sunny/);
  });

  it("takes a legacy function call's result (role 'function', with the function's name)", async () => {
    const response = await postChat({
      model: 'gpt-4o-mini',
      functions: [{ name: 'weather', parameters: { type: 'object', properties: {} } }],
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, function_call: { name: 'weather', arguments: '{}' } },
        { role: 'function', name: 'weather', content: 'sunny' },
      ],
    });
    assert.equal(response.statusCode, 200, response.body);
    assert.match(response.json().choices[0].message.content, /\S/);
  });

  it('neither asks the upstream nor moves money when validation fails', async () => {
    const fresh = await stack.newCaller('validation only');
    const accountBefore = await stack.account(fresh.accountId);
    const statsBefore = await stack.simulatorStats();
    const response = await postChat({ ...valid, temperature: 9 }, fresh.key);
    assert.equal(response.statusCode, 400);
    const accountAfter = await stack.account(fresh.accountId);
    assert.equal(accountAfter.balance_micros, accountBefore.balance_micros);
    assert.equal(accountAfter.held_micros, 0);
    assert.equal((await stack.simulatorStats()).chat_requests, statsBefore.chat_requests);
    assert.deepEqual(await stack.ledgerEntries(fresh.accountId), []);
  });
});
