import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { carriesSound, outputCharacters } from '../../../api/services/openai-proxy/output-characters.ts';

// A whole answer's message is read as a stream's delta is (chunk-translation.test.ts): an answer
// without usage is priced by the same output, whichever way it came.

describe('output characters of a whole answer', () => {
  const messages: Array<[string, Record<string, unknown>, number]> = [
    ['text', { role: 'assistant', content: 'Hello there' }, 11],
    ['a refusal', { role: 'assistant', content: null, refusal: "I can't help." }, 13],
    ['a tool call', { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }] }, 15],
    ['a legacy function call', { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }, 26],
    ['an audio answer', { role: 'assistant', content: null, audio: { id: 'a', data: 'UklGRg==', transcript: 'Hi there', expires_at: 1 } }, 8],
    ['reasoning beside text', { role: 'assistant', content: 'Yes.', reasoning_content: 'Think' }, 9],
    ['the same reasoning mirrored in both fields, once', { role: 'assistant', content: 'Yes.', reasoning_content: 'Think', reasoning: 'Think' }, 9],
  ];
  for (const [name, message, characters] of messages) {
    it(`counts ${name}: ${characters} characters`, () => assert.equal(outputCharacters(message), characters));
  }

  it('tells sound apart from a transcript', () => {
    assert.equal(carriesSound({ audio: { data: 'UklGRg==' } }), true);
    assert.equal(carriesSound({ audio: { id: 'a', transcript: 'Hi' } }), false);
    assert.equal(carriesSound({ content: 'Hi' }), false);
  });
});
