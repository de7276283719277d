import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { request } from 'undici';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { createKey } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// The official OpenAI client against the gateway in front of the simulator, with nothing
// changed but baseURL and apiKey (spec 1, 5.3).

const weatherTool: ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
    },
  },
};

describe('POST /v1/chat/completions through the openai client', () => {
  let stack: SimulatorStack;
  let client: OpenAI;
  let accountId: string;

  before(async () => {
    stack = await startOpenAiStack('chat');
    const caller = await stack.newCaller('chat');
    accountId = caller.accountId;
    client = stack.client(caller.key);
  });
  after(() => stack.close());

  it('lists the models of the key', async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    assert.ok(ids.includes('gpt-4o-mini'));
    assert.ok(ids.includes('gpt-image-1'));
    const model = await client.models.retrieve('gpt-4o-mini');
    assert.equal(model.id, 'gpt-4o-mini');
  });

  it('answers a chat completion with the caller\'s model id and usage', async () => {
    const completion = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say hello to the gateway' },
      ],
      temperature: 0.2,
    });
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.model, 'gpt-4o-mini');
    assert.match(completion.id, /^chatcmpl-/);
    assert.equal(completion.choices[0]!.message.role, 'assistant');
    assert.match(completion.choices[0]!.message.content ?? '', /Say hello to the gateway/);
    assert.equal(completion.choices[0]!.finish_reason, 'stop');
    assert.ok(completion.usage!.prompt_tokens > 0 && completion.usage!.completion_tokens > 0);
    assert.equal(completion.usage!.total_tokens, completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
  });

  it('streams deltas that add up to the non-streamed answer, and the client stops at [DONE]', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Stream these few words please' }];
    const whole = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, stream: true });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.ok(chunks.length >= 3, `only ${chunks.length} chunks`);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, whole.choices[0]!.message.content);
    assert.ok(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.model === 'gpt-4o-mini'));
    assert.equal(new Set(chunks.map((chunk) => chunk.id)).size, 1);
    assert.equal(chunks.at(-1)!.choices[0]!.finish_reason, 'stop');
    // The gateway asked the upstream for usage, but this caller did not: no usage chunk.
    assert.ok(chunks.every((chunk) => chunk.choices.length > 0 && !chunk.usage));
  });

  it('frames the stream as SSE data lines ending with data: [DONE]', async () => {
    const response = await request(`${stack.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${client.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'frame me' }] }),
    });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/event-stream/);
    assert.match(String(response.headers['x-request-id']), /^req_/);
    const text = await response.body.text();
    const events = text.split('\n\n');
    assert.equal(events.pop(), '', 'every event ends with a blank line');
    assert.equal(events.pop(), 'data: [DONE]');
    assert.ok(events.length >= 3);
    for (const event of events) {
      assert.match(event, /^data: \{/);
      const chunk = JSON.parse(event.slice('data: '.length)) as Record<string, unknown>;
      assert.equal(chunk.object, 'chat.completion.chunk');
      // The gateway asks the upstream for usage; the caller did not, and OpenAI would then send
      // chunks without a usage member at all.
      assert.ok(!('usage' in chunk), event);
    }
  });

  it('passes the usage chunk on to a caller that asked for it', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Count my tokens' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage!.prompt_tokens, 3);
    assert.equal(last.usage!.completion_tokens, chunks.filter((chunk) => chunk.choices[0]?.delta.content).length);
  });

  it('carries logprobs both ways: asked for, they come back per token, whole and streamed', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'How sure are you' }];
    const completion = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, logprobs: true, top_logprobs: 2 });
    const content = completion.choices[0]!.logprobs!.content!;
    assert.equal(content.map((entry) => entry.token).join(''), completion.choices[0]!.message.content);
    assert.ok(content.every((entry) => entry.logprob < 0 && entry.top_logprobs.length === 2));
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, logprobs: true, top_logprobs: 2, stream: true });
    const streamed: string[] = [];
    for await (const chunk of stream) for (const entry of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(entry.token);
    assert.deepEqual(streamed, content.map((entry) => entry.token));
  });

  it('round-trips a tool call and its result', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Lisbon?' }];
    const first = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, tools: [weatherTool] });
    const choice = first.choices[0]!;
    assert.equal(choice.finish_reason, 'tool_calls');
    const call = choice.message.tool_calls![0]!;
    assert.equal(call.type, 'function');
    assert.ok(call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.equal(typeof args.city, 'string');
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit));

    messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' });
    const second = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, tools: [weatherTool] });
    assert.equal(second.choices[0]!.finish_reason, 'stop');
    assert.match(second.choices[0]!.message.content ?? '', /21/);
  });

  it('streams tool-call deltas that assemble into valid arguments', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Weather in Porto, streamed' }],
      tools: [weatherTool],
      stream: true,
    });
    let name = '';
    let callId = '';
    let argumentsText = '';
    let finish: string | null = null;
    let argumentChunks = 0;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      for (const call of delta?.tool_calls ?? []) {
        if (call.id) callId = call.id;
        if (call.function?.name) name += call.function.name;
        if (call.function?.arguments) {
          argumentsText += call.function.arguments;
          argumentChunks++;
        }
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(name, 'get_weather');
    assert.match(callId, /^call_/);
    assert.ok(argumentChunks > 1, 'arguments arrive in several deltas');
    assert.equal(finish, 'tool_calls');
    assert.equal(typeof JSON.parse(argumentsText).city, 'string');

    // The stream's own helper assembles the same call.
    const runner = client.chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Weather in Faro' }], tools: [weatherTool] });
    const final = await runner.finalChatCompletion();
    const assembled = final.choices[0]!.message.tool_calls![0]!;
    assert.ok(assembled.type === 'function');
    assert.equal(typeof JSON.parse(assembled.function.arguments).unit, 'string');
  });

  it('surfaces every refusal as the client\'s own error class', async () => {
    const base = { messages: [{ role: 'user' as const, content: 'hi' }] };

    const badKey = stack.client('fg_not_a_real_key');
    await assert.rejects(badKey.chat.completions.create({ model: 'gpt-4o-mini', ...base }), OpenAI.AuthenticationError);

    const restricted = stack.client((await createKey(stack.app, accountId, { name: 'images only', models: ['gpt-image-1'] })).key);
    await assert.rejects(restricted.chat.completions.create({ model: 'gpt-4o-mini', ...base }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.PermissionDeniedError);
      assert.equal(error.status, 403);
      return true;
    });

    await assert.rejects(client.chat.completions.create({ model: 'gpt-5-imaginary', ...base }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.NotFoundError);
      assert.match(error.message, /gpt-5-imaginary/);
      return true;
    });

    await assert.rejects(client.chat.completions.create({ model: 'sora-2', ...base }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.match(error.message, /video model/);
      return true;
    });

    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', ...base, temperature: 2.5 }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.match(error.message, /temperature/);
      return true;
    });

    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'busy? [sim:error=429]' }] }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.RateLimitError);
        assert.equal(error.headers?.get('retry-after'), '1');
        assert.equal((error.error as { type?: string }).type, 'rate_limit_error');
        return true;
      },
    );

    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'busy? [sim:error=429]' }] }),
      OpenAI.RateLimitError,
    );

    // The upstream's 403 and 404 are the operator's setup (its project's access, the catalog's
    // upstream model), not the caller's: 502s in the gateway's words, which the SDK does not
    // retry. The caller asked for a model /v1/models lists.
    for (const [status, words] of [
      [403, /refused the gateway's account access to this model; the operator must fix the upstream setup/],
      [404, /does not know the upstream model this gateway maps the model to; the operator must fix the catalog/],
    ] as const) {
      await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `no [sim:error=${status}]` }] }), (error: unknown) => {
        assert.ok(error instanceof OpenAI.InternalServerError, `${status}: ${String(error)}`);
        assert.equal(error.status, 502);
        assert.match(error.message, words);
        assert.doesNotMatch(error.message, /Simulated/, 'the provider\'s words stay in the log');
        assert.equal(error.headers?.get('x-should-retry'), 'false');
        return true;
      });
    }

    // A status a model provider does not answer (a proxy's 407, say): a 502 without its words.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'proxy [sim:error=407]' }] }, { maxRetries: 0 }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError, String(error));
      assert.equal(error.message, '502 The model provider answered 407. Nothing was charged.');
      // Asking again gets the same answer, and would make the operator pay for another call.
      assert.equal(error.headers?.get('x-should-retry'), 'false');
      return true;
    });
    // Except a 408: the provider's own timeout, which another try may beat.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'slow provider [sim:error=408]' }] }, { maxRetries: 0 }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError, String(error));
      assert.equal(error.headers?.get('x-should-retry'), null);
      return true;
    });

    // OpenAI's codes that clients act on pass through a 400; others read invalid_request.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'long [sim:error=400 error_code=context_length_exceeded]' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.code, 'context_length_exceeded');
      assert.equal(error.type, 'invalid_request_error');
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'odd [sim:error=400 error_code=made_up_thing]' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.code, 'invalid_request');
      return true;
    });

    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'boom [sim:error=500]' }] }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.InternalServerError);
        assert.equal(error.status, 502);
        assert.equal((error.error as { type?: string }).type, 'upstream_error');
        return true;
      },
    );
  });
});
