import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseEvents, startSimulator, type SimulatorHarness } from './simulator-harness.ts';

// Tool arguments and JSON replies stream in fragments of 8 characters, a token each. A
// character is a code point: a fragment that ended in the first half of an emoji would reach
// the client as a lone surrogate (JSON's \ud83c), which OpenAI never sends and which a Python
// client cannot join back into the character.

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The text each streamed chunk of choice 0 carries, as `pick` finds it in the delta. */
function streamedFragments(text: string, pick: (delta: any) => unknown): string[] {
  return parseEvents(text)
    .chunks.map((chunk) => pick(chunk.choices[0]?.delta ?? {}))
    .filter((piece): piece is string => typeof piece === 'string' && piece !== '');
}

/** Checks that no fragment holds half a character, and that each but the last is 8 of them. */
function assertWholeCharacters(fragments: string[]): void {
  const broken = fragments.filter((fragment) => loneSurrogate.test(fragment));
  assert.deepEqual(broken, [], `fragments with half a character: ${JSON.stringify(broken)}`);
  const lengths = fragments.map((fragment) => Array.from(fragment).length);
  assert.ok(lengths.slice(0, -1).every((length) => length === 8) && lengths.at(-1)! <= 8, `fragment lengths in characters: ${lengths.join(', ')}`);
}

describe('simulator: chat fragments', () => {
  let simulator: SimulatorHarness;
  before(async () => {
    simulator = await startSimulator();
  });
  after(() => simulator.close());

  const chat = (body: Record<string, unknown>) => simulator.call('POST', '/v1/chat/completions', { json: { model: 'gpt-4o-mini', ...body } });

  it('cuts streamed tool arguments between characters, never inside an emoji', async () => {
    // An enum's first value is the argument: 'ab' puts the emoji off the 8-unit grid.
    const tool = { type: 'function', function: { name: 'pick', parameters: { type: 'object', properties: { wave: { type: 'string', enum: ['ab🌊🌊🌊🌊🌊🌊'] } }, required: ['wave'] } } };
    const streamed = await chat({ stream: true, stream_options: { include_usage: true }, tools: [tool], messages: [{ role: 'user', content: 'go' }] });
    const fragments = streamedFragments(streamed.text, (delta) => delta.tool_calls?.[0]?.function?.arguments);
    assert.equal(fragments.join(''), '{"wave":"ab🌊🌊🌊🌊🌊🌊"}');
    assertWholeCharacters(fragments);
    assert.equal(parseEvents(streamed.text).chunks.at(-1).usage.completion_tokens, fragments.length, 'a fragment is a token');
  });

  it('cuts a streamed JSON reply between characters, never inside an emoji', async () => {
    const content = '🌊🌊🌊🌊 🌊🌊🌊🌊 🌊🌊🌊🌊';
    const streamed = await chat({ stream: true, response_format: { type: 'json_object' }, messages: [{ role: 'user', content }] });
    const fragments = streamedFragments(streamed.text, (delta) => delta.content);
    assert.deepEqual(JSON.parse(fragments.join('')), { reply: `This is a simulated reply to: ${content}` });
    assertWholeCharacters(fragments);
  });
});
