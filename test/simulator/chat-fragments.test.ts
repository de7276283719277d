import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseEvents, startSimulator, type SimulatorHarness } from './simulator-harness.ts';

// Tool arguments and JSON replies stream in fragments of 8 characters, a token each. A
// character is a code point: a fragment that ended in the first half of an emoji would reach
// the client as a lone surrogate (JSON's \ud83c), which OpenAI never sends and which a Python
// client cannot join back into the character. max_tokens counts those fragments, in a tool
// call as in text.

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

const lookupTool = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { query: { type: 'string', minLength: 40 } }, required: ['query'] } } };

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

  it('cuts a tool call at max_tokens with finish_reason length, its arguments as far as they got', async () => {
    const whole = await chat({ tools: [lookupTool], messages: [{ role: 'user', content: 'go' }] });
    const wholeArguments: string = whole.json.choices[0].message.tool_calls[0].function.arguments;
    assert.ok(whole.json.usage.completion_tokens > 2, `${whole.json.usage.completion_tokens} fragments, more than the limit below`);

    // OpenAI keeps the call, with arguments that are no whole JSON, and says why it stopped.
    const cut = await chat({ max_tokens: 2, tools: [lookupTool], messages: [{ role: 'user', content: 'go' }] });
    assert.equal(cut.status, 200);
    const choice = cut.json.choices[0];
    assert.equal(choice.finish_reason, 'length');
    assert.equal(choice.message.tool_calls[0].function.name, 'lookup');
    assert.equal(choice.message.tool_calls[0].function.arguments, Array.from(wholeArguments).slice(0, 16).join(''), 'two fragments');
    assert.equal(cut.json.usage.completion_tokens, 2);

    // The stream sends the same two fragments, and its usage counts what it sent.
    const streamed = await chat({ max_tokens: 2, stream: true, stream_options: { include_usage: true }, tools: [lookupTool], messages: [{ role: 'user', content: 'go' }] });
    const { chunks } = parseEvents(streamed.text);
    const fragments = streamedFragments(streamed.text, (delta) => delta.tool_calls?.[0]?.function?.arguments);
    assert.deepEqual([fragments.length, fragments.join('')], [2, choice.message.tool_calls[0].function.arguments]);
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
    assert.equal(chunks.at(-1).usage.completion_tokens, 2);
  });

  it('takes max_completion_tokens over max_tokens for a tool call, as for text, per choice; a limit it fits in leaves it whole', async () => {
    const both = await chat({ n: 2, max_completion_tokens: 1, max_tokens: 3, tools: [lookupTool], messages: [{ role: 'user', content: 'go' }] });
    assert.deepEqual(both.json.choices.map((choice: { finish_reason: string }) => choice.finish_reason), ['length', 'length']);
    assert.equal(both.json.usage.completion_tokens, 2, 'one fragment in each of two choices');

    const whole = await chat({ tools: [lookupTool], messages: [{ role: 'user', content: 'go' }] });
    const exact = await chat({ max_tokens: whole.json.usage.completion_tokens, tools: [lookupTool], messages: [{ role: 'user', content: 'go' }] });
    assert.equal(exact.json.choices[0].finish_reason, 'tool_calls');
    assert.equal(exact.json.choices[0].message.tool_calls[0].function.arguments, whole.json.choices[0].message.tool_calls[0].function.arguments);
  });
});
