import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { newRelayState, translate } from '../../../api/services/openai-proxy/chunk-translation.ts';

// What a stream the caller abandons is billed for, when the upstream reported no usage, is what
// was delivered (chat-stream.ts): every kind of output a chunk can carry must count, or a
// caller who leaves mid-answer gets that kind for nothing.

const event = (delta: object) => ({ data: JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, finish_reason: null }] }) });

describe('chunk translation: output delivered', () => {
  const kinds: Array<[string, object, number]> = [
    ['text', { content: 'Hello' }, 5],
    ['a refusal', { refusal: 'No.' }, 3],
    ['reasoning as reasoning_content', { reasoning_content: 'Think' }, 5],
    ['reasoning as reasoning', { reasoning: 'Think!' }, 6],
    ['a tool call', { tool_calls: [{ index: 0, function: { name: 'f', arguments: '{"a":' } }] }, 6],
    ['a legacy function call', { function_call: { name: 'get_weather', arguments: '{"city":' } }, 19],
    ['audio with its transcript', { audio: { id: 'a', data: 'UklGRg==', transcript: 'Hi there' } }, 8],
    ['audio alone', { audio: { data: 'UklGRg==' } }, 0],
  ];
  for (const [name, delta, characters] of kinds) {
    it(`counts ${name} as a piece of ${characters} characters`, () => {
      const state = newRelayState(1);
      const sent = translate(event(delta), state, false, 'm');
      assert.notEqual(sent, '', 'passed on to the caller');
      assert.deepEqual(state.delivered, { pieces: 1, characters });
    });
  }

  it('counts nothing for a chunk without output (the role, an empty delta, an audio id alone)', () => {
    const state = newRelayState(1);
    for (const delta of [{ role: 'assistant' }, {}, { content: '' }, { audio: { id: 'a', expires_at: 1 } }]) translate(event(delta), state, false, 'm');
    assert.deepEqual(state.delivered, { pieces: 0, characters: 0 });
  });
});

describe('chunk translation: the usage the gateway asked for', () => {
  const chunk = (rest: string) => `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]${rest}}`;

  it('cuts a `usage: null` the caller did not ask for out of each chunk, and keeps it for one who did', () => {
    for (const [label, data] of [
      ['compact', chunk(',"usage":null')],
      ['spaced', chunk(', "usage": null')],
      ['first', chunk('').replace('{"id"', '{"usage":null,"id"')],
      ['beside a later member', chunk(',"usage":null,"obfuscation":"x"')],
      // A text that says "usage" is a string value, told apart by a parse.
      ['with "usage" in the text', chunk(',"usage":null').replace('"Hi"', '"usage"')],
      // The top-level key spelt with an escape, and a nested member spelt out: the nested one stays.
      ['escaped, beside a nested one', chunk(',"us\\u0061ge":null').replace('"finish_reason":null', '"finish_reason":null,"logprobs":{"usage":null}')],
    ] as const) {
      const sent = translate({ data }, newRelayState(1), false, 'm');
      const parsed = JSON.parse(sent.replace(/^data: /, '')) as Record<string, unknown>;
      assert.ok(!('usage' in parsed), `${label}: ${sent}`);
      assert.deepEqual(parsed.choices, (JSON.parse(data) as { choices: unknown }).choices, label);
      assert.deepEqual({ ...parsed }, (({ usage: _usage, ...rest }) => rest)(JSON.parse(data) as Record<string, unknown>), `${label}: nothing else changed`);
      const asked = translate({ data }, newRelayState(1), true, 'm');
      assert.equal(asked, `data: ${data}\n\n`, `${label}: passed on as it came`);
    }
  });
});
