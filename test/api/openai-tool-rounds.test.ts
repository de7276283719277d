import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startApiBeforeUpstream, startFakeUpstream, sseWriter, type OpenAiStack, type RecordedRequest } from '../helpers/openai-stack.ts';

// The simulator answers a tool result with text, so a client's tool loop ends after one round
// there. A provider that calls tools for several rounds, two at once in the first, is scripted
// here, to see that the gateway relays what runTools() needs to go round again: parallel calls
// (streamed interleaved by index), their ids, and each round's usage.

const UPSTREAM_MODEL = 'gpt-4o-mini-2024-07-18';

interface Call { id: string; name: string; arguments: string }

/** The calls of each round, by how many assistant turns with calls came before. */
function callsFor(round: number): Call[] {
  if (round === 0) return [{ id: 'call_a0', name: 'get_a', arguments: '{"q":"first"}' }, { id: 'call_b0', name: 'get_b', arguments: '{"q":"second"}' }];
  if (round === 1) return [{ id: 'call_a1', name: 'get_a', arguments: '{"q":"third"}' }];
  return [];
}

function answer(recorded: RecordedRequest, response: ServerResponse): void {
  const messages = recorded.body.messages as Array<{ role: string; content?: unknown; tool_calls?: unknown[] }>;
  const round = messages.filter((message) => message.role === 'assistant' && message.tool_calls?.length).length;
  const calls = callsFor(round);
  const results = messages.filter((message) => message.role === 'tool').map((message) => String(message.content));
  const text = calls.length === 0 ? `results: ${results.join(', ')}` : null;
  const usage = { prompt_tokens: 10 + round, completion_tokens: 5, total_tokens: 15 + round };
  const base = { id: `chatcmpl-${round}`, created: 1, model: UPSTREAM_MODEL };
  if (recorded.body.stream !== true) {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, finish_reason: calls.length ? 'tool_calls' : 'stop', message: { role: 'assistant', content: text, ...(calls.length ? { tool_calls: calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })) } : {}) } }],
      usage,
    }));
    return;
  }
  const send = sseWriter(response);
  const chunk = (delta: object, finish: string | null = null) => send({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], usage: null });
  chunk({ role: 'assistant', content: null });
  // Each call opens with its id and name, then the calls' arguments arrive interleaved.
  calls.forEach((call, index) => chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }));
  const halves = calls.map((call) => [call.arguments.slice(0, 5), call.arguments.slice(5)]);
  for (const part of [0, 1]) calls.forEach((_, index) => chunk({ tool_calls: [{ index, function: { arguments: halves[index]![part] } }] }));
  if (text) for (const word of text.split(' ')) chunk({ content: `${word} ` });
  chunk({}, calls.length ? 'tool_calls' : 'stop');
  send({ ...base, object: 'chat.completion.chunk', choices: [], usage });
  send('[DONE]');
  response.end();
}

describe('runTools() over several rounds of parallel tool calls, through the gateway', () => {
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  before(async () => {
    upstream = await startFakeUpstream(answer);
    stack = await startApiBeforeUpstream('openai-tool-rounds', upstream.url, { upstreamChatModel: UPSTREAM_MODEL });
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  for (const stream of [false, true]) {
    it(`runs three rounds, the first with two calls at once (stream: ${stream})`, async () => {
      const client = stack.client((await stack.newCaller(`rounds-${stream}`)).key);
      const ran: string[] = [];
      const tool = (name: string) => ({
        type: 'function' as const,
        function: {
          name,
          parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
          parse: JSON.parse,
          function: (args: { q: string }) => {
            ran.push(`${name}(${args.q})`);
            return `${name}=${args.q}`;
          },
        },
      });
      const runner = client.chat.completions.runTools({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream, ...(stream ? { stream_options: { include_usage: true } } : {}), tools: [tool('get_a'), tool('get_b')] } as never);
      const content = await runner.finalContent();
      assert.deepEqual(ran, ['get_a(first)', 'get_b(second)', 'get_a(third)']);
      assert.equal(content?.trim(), 'results: get_a=first, get_b=second, get_a=third');
      // Each round's usage (a stream's only because it asked for it, as on OpenAI).
      const total = await runner.totalUsage();
      assert.deepEqual(total, { prompt_tokens: 33, completion_tokens: 15, total_tokens: 48 });
      // What the provider saw in the last round: both parallel results, tied to their ids.
      const last = upstream.received.at(-1)!.body.messages as Array<{ role: string; tool_call_id?: string }>;
      assert.deepEqual(last.filter((message) => message.role === 'tool').map((message) => message.tool_call_id), ['call_a0', 'call_b0', 'call_a1']);
      // And every completion the caller saw named the caller's model.
      for (const completion of runner.allChatCompletions()) assert.equal(completion.model, 'gpt-4o-mini');
    });
  }
});
