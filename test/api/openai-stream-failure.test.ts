import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { APIError } from 'openai';
import { pythonStreamHelper } from '../helpers/python-stream-helper.ts';
import { startApiBeforeUpstream, startFakeUpstream, sseWriter, type OpenAiStack, type RecordedRequest } from '../helpers/openai-stack.ts';

// A provider that breaks off mid-stream: what the official clients make of the gateway's last
// event (an error object, as OpenAI ends a failed stream), through their stream helpers.

const UPSTREAM_MODEL = 'gpt-4o-mini-2024-07-18';

function breakOff(_recorded: RecordedRequest, response: ServerResponse): void {
  const send = sseWriter(response);
  for (const word of ['Hello ', 'there ']) send({ id: 'c', object: 'chat.completion.chunk', created: 1, model: UPSTREAM_MODEL, choices: [{ index: 0, delta: { role: 'assistant', content: word }, finish_reason: null }] });
  setTimeout(() => response.socket?.destroy(), 50);
}

describe('a stream the provider breaks off, as the official clients see it', () => {
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  before(async () => {
    upstream = await startFakeUpstream(breakOff);
    stack = await startApiBeforeUpstream('openai-stream-failure', upstream.url, { upstreamChatModel: UPSTREAM_MODEL });
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  it('Node: the stream helper rejects with an APIError naming the failure, after the text so far', async () => {
    const client = stack.client((await stack.newCaller('node')).key);
    const stream = client.chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    stream.on('content', (delta) => (text += delta));
    const error = await stream.finalChatCompletion().then(() => undefined, (caught: unknown) => caught);
    assert.ok(error instanceof APIError, `an APIError, not ${String(error)}`);
    assert.equal(error.code, 'upstream_error');
    assert.equal(error.type, 'upstream_error');
    assert.match(error.message, /mid-stream/);
    assert.equal(text, 'Hello there ');
  });

  it('Python: iterating raises openai.APIError with the error body', async () => {
    const caller = await stack.newCaller('python');
    const seen = await pythonStreamHelper(`${stack.baseUrl}/v1`, caller.key, 'hi');
    assert.equal(seen.raised, 'APIError');
    assert.equal(seen.code, 'upstream_error');
    assert.match(seen.message ?? '', /mid-stream/);
    assert.equal(seen.text, 'Hello there ');
  });
});
