import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { authorization, parseEvents, startSimulator, type SimulatorHarness } from './simulator-harness.ts';

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', minLength: 2 },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer', minimum: 1, maximum: 7 },
        hourly: { type: 'boolean' },
      },
      required: ['city', 'unit', 'days'],
    },
  },
};

describe('simulator: OpenAI chat completions', () => {
  let simulator: SimulatorHarness;
  before(async () => {
    simulator = await startSimulator();
  });
  after(() => simulator.close());

  const chat = (body: Record<string, unknown>) => simulator.call('POST', '/v1/chat/completions', { json: { model: 'gpt-4o-mini', ...body } });

  it('answers a deterministic chat.completion with word-count usage', async () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Tell me about foxes' },
    ];
    const first = await chat({ messages });
    assert.equal(first.status, 200);
    const completion = first.json;
    assert.match(completion.id, /^chatcmpl-/);
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.model, 'gpt-4o-mini');
    assert.equal(typeof completion.created, 'number');
    assert.equal(completion.choices.length, 1);
    assert.deepEqual([completion.choices[0].index, completion.choices[0].message.role, completion.choices[0].finish_reason], [0, 'assistant', 'stop']);
    const content: string = completion.choices[0].message.content;
    assert.equal(content, 'This is a simulated reply to: Tell me about foxes');
    assert.deepEqual(completion.usage, { prompt_tokens: 6, completion_tokens: 10, total_tokens: 16 });
    assert.equal((await chat({ messages })).json.choices[0].message.content, content, 'same question, same answer');
  });

  it('streams the reply token by token and ends with [DONE]; no usage chunk unless asked', async () => {
    const response = await chat({ stream: true, messages: [{ role: 'user', content: 'stream this please' }] });
    assert.equal(response.status, 200);
    assert.match(String(response.headers['content-type']), /^text\/event-stream/);
    const { done, chunks } = parseEvents(response.text);
    assert.ok(done, 'ends with data: [DONE]');
    assert.ok(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.id === chunks[0].id));
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, 'This is a simulated reply to: stream this please');
    const contentChunks = chunks.filter((chunk) => chunk.choices[0]?.delta.content);
    assert.equal(contentChunks.length, 9, 'one chunk per word');
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
    assert.ok(chunks.every((chunk) => chunk.choices.length === 1 && chunk.usage === undefined));
  });

  it('adds a usage chunk with empty choices when stream_options.include_usage is true', async () => {
    const response = await chat({ stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'count me [sim:chunks=5 gap_ms=1]' }] });
    const { done, chunks } = parseEvents(response.text);
    assert.ok(done);
    const usageChunk = chunks.at(-1);
    assert.deepEqual(usageChunk.choices, []);
    // The marker is part of what the vendor reads: four words in, five chunks out.
    assert.deepEqual(usageChunk.usage, { prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 });
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'stop');
    assert.equal(chunks.filter((chunk) => chunk.choices[0]?.delta.content).length, 5, '[sim:chunks=5] gives five content chunks');
  });

  it('answers n choices, each its own stream of chunks, with usage for all of them', async () => {
    const whole = await chat({ n: 3, max_tokens: 2, messages: [{ role: 'user', content: 'three ways' }] });
    assert.deepEqual(whole.json.choices.map((choice: { index: number }) => choice.index), [0, 1, 2]);
    assert.ok(whole.json.choices.every((choice: { message: { content: string } }) => choice.message.content === 'This is'));
    assert.deepEqual(whole.json.usage, { prompt_tokens: 2, completion_tokens: 6, total_tokens: 8 });

    const streamed = await chat({ n: 2, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'two ways' }] });
    const { done, chunks } = parseEvents(streamed.text);
    assert.ok(done);
    const textOf = (index: number) => chunks.map((chunk) => (chunk.choices[0]?.index === index ? chunk.choices[0].delta.content ?? '' : '')).join('');
    assert.equal(textOf(0), 'This is a simulated reply to: two ways');
    assert.equal(textOf(1), textOf(0));
    const finishes = chunks.filter((chunk) => chunk.choices[0]?.finish_reason).map((chunk) => chunk.choices[0].index);
    assert.deepEqual(finishes, [0, 1]);
    assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 2, completion_tokens: 16, total_tokens: 18 });

    const tooMany = await chat({ n: 129, messages: [{ role: 'user', content: 'many' }] });
    assert.equal(tooMany.status, 400);
  });

  it('stops at max_tokens with finish_reason length', async () => {
    const response = await chat({ max_tokens: 3, messages: [{ role: 'user', content: 'a long question here' }] });
    assert.equal(response.json.choices[0].message.content, 'This is a');
    assert.equal(response.json.choices[0].finish_reason, 'length');
    assert.equal(response.json.usage.completion_tokens, 3);
  });

  it('calls a tool with schema-valid arguments, then reports the tool result (round trip)', async () => {
    const question = { role: 'user', content: 'What is the weather in Lisbon?' };
    const first = await chat({ messages: [question], tools: [weatherTool] });
    assert.equal(first.status, 200);
    const choice = first.json.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    const [call] = choice.message.tool_calls;
    assert.match(call.id, /^call_/);
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args).sort(), ['city', 'days', 'unit']);
    assert.ok(typeof args.city === 'string' && args.city.length >= 2);
    assert.equal(args.unit, 'celsius', "an enum's first value");
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7);

    const second = await chat({
      tools: [weatherTool],
      messages: [question, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21, "sky": "clear"}' }],
    });
    assert.equal(second.json.choices[0].finish_reason, 'stop');
    assert.match(second.json.choices[0].message.content, /\{"temperature": 21, "sky": "clear"\}/);
  });

  it('streams a tool call as tool_calls deltas: id and name first, then the arguments in pieces', async () => {
    const otherTool = { type: 'function', function: { name: 'noop', parameters: { type: 'object', properties: {} } } };
    const response = await chat({
      stream: true,
      tools: [otherTool, weatherTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      messages: [{ role: 'user', content: 'weather?' }],
    });
    const { done, chunks } = parseEvents(response.text);
    assert.ok(done);
    const first = chunks[0].choices[0].delta.tool_calls[0];
    assert.equal(first.function.name, 'get_weather', 'tool_choice picks the named tool');
    assert.match(first.id, /^call_/);
    const pieces = chunks.slice(1).flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    assert.ok(pieces.length > 1, 'arguments arrive in several pieces');
    assert.ok(pieces.every((piece) => piece.index === 0 && piece.id === undefined));
    const args = JSON.parse(pieces.map((piece) => piece.function.arguments).join(''));
    assert.equal(args.unit, 'celsius');
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  });

  it('answers in text when tool_choice is none, and 400 when tool_choice names an unknown tool', async () => {
    const none = await chat({ tools: [weatherTool], tool_choice: 'none', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(none.json.choices[0].finish_reason, 'stop');
    assert.equal(none.json.choices[0].message.tool_calls, undefined);
    const unknown = await chat({ tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'nope' } }, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.error.param, 'tool_choice');
  });

  it('gives each of n choices its own tool call id, streamed and not', async () => {
    const whole = await chat({ n: 3, tools: [weatherTool], messages: [{ role: 'user', content: 'weather?' }] });
    const ids = whole.json.choices.map((choice: { message: { tool_calls: Array<{ id: string }> } }) => choice.message.tool_calls[0]!.id);
    assert.equal(new Set(ids).size, 3, `ids ${ids.join(', ')}`);
    const streamed = await chat({ n: 2, stream: true, tools: [weatherTool], messages: [{ role: 'user', content: 'weather?' }] });
    const { chunks } = parseEvents(streamed.text);
    const streamedIds = chunks.flatMap((chunk) => chunk.choices.flatMap((choice: { index: number; delta: { tool_calls?: Array<{ id?: string }> } }) => (choice.delta.tool_calls ?? []).filter((call) => call.id).map((call) => `${choice.index}:${call.id}`)));
    assert.equal(streamedIds.length, 2);
    assert.notEqual(streamedIds[0]!.split(':')[1], streamedIds[1]!.split(':')[1]);
  });

  it('tool_choice allowed_tools calls the first of the tools it allows; an allowed name that is no tool is a 400', async () => {
    const otherTool = { type: 'function', function: { name: 'noop', parameters: { type: 'object', properties: {} } } };
    const allowedTools = (names: string[]) => ({ type: 'allowed_tools', allowed_tools: { mode: 'required', tools: names.map((name) => ({ type: 'function', function: { name } })) } });
    const narrowed = await chat({ tools: [otherTool, weatherTool], tool_choice: allowedTools(['get_weather']), messages: [{ role: 'user', content: 'weather?' }] });
    assert.equal(narrowed.status, 200);
    assert.equal(narrowed.json.choices[0].finish_reason, 'tool_calls');
    assert.equal(narrowed.json.choices[0].message.tool_calls[0].function.name, 'get_weather');
    const unknown = await chat({ tools: [weatherTool], tool_choice: allowedTools(['get_weather', 'nope']), messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.error.param, 'tool_choice');
  });

  it('answers JSON for response_format: a value of the json_schema, the reply under `reply` for json_object, streamed in fragments', async () => {
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, population: { type: 'integer', minimum: 1000 }, tags: { type: 'array', items: { type: 'string', enum: ['coast', 'inland'] } } },
      required: ['city', 'population', 'tags'],
      additionalProperties: false,
    };
    const structured = await chat({ response_format: { type: 'json_schema', json_schema: { name: 'city', schema, strict: true } }, messages: [{ role: 'user', content: 'describe a city' }] });
    assert.equal(structured.status, 200);
    assert.deepEqual(JSON.parse(structured.json.choices[0].message.content), { city: 'sample', population: 1000, tags: ['coast'] });
    const object = await chat({ response_format: { type: 'json_object' }, messages: [{ role: 'user', content: 'answer in JSON' }] });
    assert.deepEqual(JSON.parse(object.json.choices[0].message.content), { reply: 'This is a simulated reply to: answer in JSON' });

    const streamed = await chat({ stream: true, stream_options: { include_usage: true }, response_format: { type: 'json_schema', json_schema: { name: 'city', schema } }, messages: [{ role: 'user', content: 'describe a city' }] });
    const { done, chunks } = parseEvents(streamed.text);
    assert.ok(done);
    const deltas = chunks.flatMap((chunk) => chunk.choices).map((choice) => choice.delta.content).filter((text) => typeof text === 'string' && text !== '');
    assert.ok(deltas.length > 1, 'the JSON arrives in several pieces');
    assert.equal(deltas.join(''), structured.json.choices[0].message.content);
    assert.equal(chunks.at(-1).usage.completion_tokens, deltas.length, 'a piece is a token');

    const badFormat = await chat({ response_format: { type: 'json_schema' }, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(badFormat.status, 400);
  });

  it('stops before the first of its stop sequences, with finish_reason stop', async () => {
    const cut = await chat({ stop: ['zzz', 'reply'], messages: [{ role: 'user', content: 'Tell me about foxes' }] });
    // Words are pieces: the space before the stop goes with the word after it.
    assert.equal(cut.json.choices[0].message.content, 'This is a simulated');
    assert.equal(cut.json.choices[0].finish_reason, 'stop');
    assert.equal(cut.json.usage.completion_tokens, 4);
    const single = await chat({ stop: 'about', messages: [{ role: 'user', content: 'Tell me about foxes' }] });
    assert.equal(single.json.choices[0].message.content, 'This is a simulated reply to: Tell me');
    const untouched = await chat({ stop: ['zzz'], messages: [{ role: 'user', content: 'Tell me about foxes' }] });
    assert.equal(untouched.json.choices[0].message.content, 'This is a simulated reply to: Tell me about foxes');
  });

  it('gives each token of a text reply its logprobs with logprobs: true, and its top_logprobs, the chosen token first; streamed a token a chunk', async () => {
    const messages = [{ role: 'user', content: 'Tell me about foxes' }];
    const plain = await chat({ messages });
    assert.equal(plain.json.choices[0].logprobs, null);
    const whole = await chat({ messages, logprobs: true, top_logprobs: 3 });
    const content = whole.json.choices[0].logprobs.content as { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number }[] }[];
    assert.equal(content.map((entry) => entry.token).join(''), whole.json.choices[0].message.content);
    assert.equal(content.length, whole.json.usage.completion_tokens);
    for (const entry of content) {
      assert.ok(entry.logprob < 0, `${entry.logprob}`);
      assert.deepEqual(entry.bytes, [...Buffer.from(entry.token)]);
      assert.equal(entry.top_logprobs.length, 3);
      assert.deepEqual(entry.top_logprobs[0], { token: entry.token, logprob: entry.logprob, bytes: entry.bytes });
      assert.ok(entry.top_logprobs[1]!.logprob < entry.logprob && entry.top_logprobs[2]!.logprob < entry.top_logprobs[1]!.logprob);
    }
    assert.deepEqual(
      (await chat({ messages, logprobs: true })).json.choices[0].logprobs.content.map((entry: { top_logprobs: unknown[] }) => entry.top_logprobs),
      content.map(() => []),
    );
    const streamed = parseEvents((await chat({ messages, logprobs: true, top_logprobs: 3, stream: true })).text);
    const pieces = streamed.chunks.filter((chunk) => chunk.choices[0]?.delta.content);
    assert.deepEqual(
      pieces.map((chunk) => chunk.choices[0].logprobs.content),
      content.map((entry) => [entry]),
    );
    const refused = await chat({ messages, top_logprobs: 2 });
    assert.equal(refused.status, 400);
    assert.equal(refused.json.error.param, 'top_logprobs');
  });

  it('[sim:error=429] fails with 429, Retry-After and OpenAI\'s error shape; other statuses too', async () => {
    const limited = await chat({ messages: [{ role: 'user', content: 'busy? [sim:error=429]' }] });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '1');
    assert.deepEqual(Object.keys(limited.json.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(limited.json.error.code, 'rate_limit_exceeded');
    const broken = await chat({ stream: true, messages: [{ role: 'user', content: 'broken [sim:error=500]' }] });
    assert.equal(broken.status, 500);
    assert.equal(broken.json.error.type, 'server_error');
    const onlyLastUserMessageCounts = await chat({ messages: [{ role: 'user', content: '[sim:error=500]' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'fine now' }] });
    assert.equal(onlyLastUserMessageCounts.status, 200);
  });

  it('[sim:delay_ms=N] holds the first byte back', async () => {
    const started = performance.now();
    const response = await chat({ messages: [{ role: 'user', content: 'wait [sim:delay_ms=150]' }] });
    assert.equal(response.status, 200);
    assert.ok(performance.now() - started >= 140, 'took at least the delay');
  });

  it('validates the body and requires a bearer key', async () => {
    const noMessages = await chat({ messages: [] });
    assert.equal(noMessages.status, 400);
    assert.equal(noMessages.json.error.param, 'messages');
    const anonymous = await simulator.call('POST', '/v1/chat/completions', { anonymous: true, json: { model: 'm', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json.error.code, 'invalid_api_key');
  });

  it('counts a client that disconnects mid-stream in /_sim/stats', async () => {
    const before = await simulator.stats();
    const controller = new AbortController();
    const response = await fetch(`${simulator.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'a slow story [sim:slow]' }] }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /^data: /);
    controller.abort();
    await reader.cancel().catch(() => {});

    let stats = await simulator.stats();
    for (let attempt = 0; attempt < 50 && stats.chat_streams_aborted === before.chat_streams_aborted; attempt++) {
      await sleep(20);
      stats = await simulator.stats();
    }
    assert.equal(stats.chat_streams_aborted, before.chat_streams_aborted! + 1);
    assert.equal(stats.chat_requests, before.chat_requests! + 1);

    // A stream read to the end is not counted as aborted.
    await chat({ stream: true, messages: [{ role: 'user', content: 'complete [sim:chunks=2 gap_ms=5]' }] });
    await sleep(50);
    assert.equal((await simulator.stats()).chat_streams_aborted, before.chat_streams_aborted! + 1);
  });
});
