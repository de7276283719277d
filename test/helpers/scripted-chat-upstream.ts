import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import type OpenAI from 'openai';
import type { UpstreamClientOptions } from '../../api/services/openai-proxy/upstream-client.ts';
import { sseWriter, startApiBeforeUpstream, startFakeUpstream, type OpenAiStack, type RecordedRequest } from './openai-stack.ts';

// A scripted OpenAI-compatible upstream for test/api/chat-upstream.test.ts and its neighbours
// upstream-usage-billing and upstream-refusals (pass answerScripted to startFakeUpstream): what
// it answers is chosen by the last user message, to show what the simulator cannot (refusals,
// a connection reset, mid-stream failures, a flood, a slow start, usage no call can have had).

export const UPSTREAM_MODEL = 'gpt-4o-mini-2024-07-18';
/** Usage a real upstream could report for the scripts' short prompts: no more input tokens than
 * the request has bytes (the gateway charges no more than that, core/chat-pricing.ts). */
export const UPSTREAM_USAGE = { prompt_tokens: 12, completion_tokens: 2000, total_tokens: 2012 };
/** What UPSTREAM_USAGE costs at gpt-4o-mini's catalog prices: 12 × 0.15 + 2000 × 0.60 micro-USD,
 * rounded up. */
export const UPSTREAM_USAGE_PRICE = 1_202;
/** Usage no call of the scripts can have used: 900 million tokens each way. */
export const IMPOSSIBLE_USAGE = { prompt_tokens: 900_000_000, completion_tokens: 900_000_000, total_tokens: 1_800_000_000 };

function completion(content: string) {
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: UPSTREAM_MODEL,
    system_fingerprint: 'fp_fake',
    choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: 'stop' }],
    usage: UPSTREAM_USAGE,
  };
}

const chunk = (delta: object, finish: string | null = null) => ({
  id: 'chatcmpl-fake',
  object: 'chat.completion.chunk',
  created: 1_700_000_000,
  model: UPSTREAM_MODEL,
  choices: [{ index: 0, delta, finish_reason: finish }],
  usage: null,
});

/** What a provider's 429 says: the operator's organisation, model and limits. */
export const UPSTREAM_RATE_LIMIT_MESSAGE = 'Rate limit reached for gpt-4o-mini-2024-07-18 in organization org-Operator123 on requests per min (RPM): Limit 500, Used 500, Requested 1.';

/** Token counts no call can have: the gateway must price the call from its estimate. */
export const FRACTIONAL_USAGE = { prompt_tokens: 12.5, completion_tokens: 3, total_tokens: 15.5 };

/** The bodies of 'open after done' streams, which the upstream never ends itself. */
export const afterDone: { openBodies: ServerResponse[] } = { openBodies: [] };

/** What a provider's error inside a 200 says: the operator's organisation and project. */
export const PROVIDER_ERROR_WORDS = 'internal: org-Operator123 quota for project proj_abc exceeded';

/** Released by the test once the caller of a 'half an event first' stream has the head. */
export const halfEvent: { release: () => void; promise: Promise<void> } = { release: () => {}, promise: Promise.resolve() };
halfEvent.promise = new Promise((resolve) => (halfEvent.release = resolve));

/** Released by the test once the caller of a 'think first' stream has the response head. */
export const thinking: { release: () => void; promise: Promise<void> } = { release: () => {}, promise: Promise.resolve() };
thinking.promise = new Promise((resolve) => (thinking.release = resolve));

/** How often each last user message was seen (a first attempt can be scripted to fail). */
const timesSaid = new Map<string, number>();

/** `send` for a response whose head was already written. */
function sseWriterless(response: ServerResponse): (data: unknown) => void {
  return (data) => response.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

/** A stream's last events: the finish, the usage chunk (asked for or not), [DONE]. */
function endStream(send: (data: unknown) => void, response: ServerResponse, usage: object = UPSTREAM_USAGE): void {
  send(chunk({}, 'stop'));
  send({ ...chunk({}), choices: [], usage });
  send('[DONE]');
  response.end();
}

/** Scripted behaviour, chosen by the last user message. */
export async function answerScripted(recorded: RecordedRequest, response: ServerResponse): Promise<void> {
  if (recorded.path.endsWith('/images/generations')) {
    // Entries that are no image: nothing to hand over or charge.
    if (recorded.body.prompt === 'hollow') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1_700_000_000, data: [{}, null, { url: '' }, { revised_prompt: 'a fox' }] }));
      return;
    }
    if (recorded.body.prompt === 'one hollow') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1_700_000_000, data: [{ url: 'https://images.example/0.png' }, {}] }));
      return;
    }
    // Two images more than asked for, as a misbehaving upstream might.
    const data = Array.from({ length: (recorded.body.n ?? 1) + 2 }, (_unused, index) => ({ url: `https://images.example/${index}.png` }));
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1_700_000_000, data }));
    return;
  }
  const said = String(recorded.body.messages?.at(-1)?.content ?? '');
  const attempt = (timesSaid.get(said) ?? 0) + 1;
  timesSaid.set(said, attempt);
  if ((said === 'reset first' && attempt === 1) || said === 'reset always') {
    response.socket?.destroy();
    return;
  }
  if (said === 'drop late') {
    // Takes the request, works on it for a while, then the connection goes (an idle timeout).
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    response.socket?.destroy();
    return;
  }
  if (said === 'refuse') {
    response.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'logit_bias is malformed', type: 'invalid_request_error', param: 'logit_bias', code: null } }));
    return;
  }
  if (said === 'bad credentials') {
    response.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } }));
    return;
  }
  if (said === 'slow down') {
    response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '7' }).end(JSON.stringify({ error: { message: UPSTREAM_RATE_LIMIT_MESSAGE, type: 'requests', code: 'rate_limit_exceeded' } }));
    return;
  }
  if (said === 'slow down briefly') {
    // OpenAI's own 429s carry retry-after-ms, which its SDKs read before Retry-After.
    response.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '1500' }).end(JSON.stringify({ error: { message: UPSTREAM_RATE_LIMIT_MESSAGE, type: 'requests', code: 'rate_limit_exceeded' } }));
    return;
  }
  if (said === 'no quota') {
    response.writeHead(429, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } }));
    return;
  }
  if (said === 'conflict') {
    response.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'Another request with these parameters is in progress.', type: 'invalid_request_error', param: null, code: 'conflict' } }));
    return;
  }
  if (said === 'provider down') {
    response.writeHead(503, { 'content-type': 'text/html' }).end('<html><body>upstream connect error: 10.0.7.12:8443 pool overflow</body></html>');
    return;
  }
  if (said === 'break off') {
    // A head promising more than ever comes, half an answer, then the connection drops.
    const text = JSON.stringify(completion('This answer never arrives whole.'));
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(text.length) });
    response.write(text.slice(0, text.length / 2));
    await new Promise((resolve) => setTimeout(resolve, 50));
    response.socket?.destroy();
    return;
  }
  if (said === 'not json') {
    response.writeHead(200, { 'content-type': 'application/json' }).end('<html>502 Bad Gateway</html>');
    return;
  }
  if (said === 'flood') {
    await flood(response);
    return;
  }
  if (said === 'think first') {
    // The head at once, the first chunk only when the test has seen the head reach its caller.
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.flushHeaders();
    await thinking.promise;
    response.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: 'Done thinking' }, 'stop'))}\n\n`);
    response.end('data: [DONE]\n\n');
    return;
  }
  if (said === 'split characters') {
    await splitCharacters(response);
    return;
  }
  if (said === 'error with 200' && recorded.body.stream !== true) {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: PROVIDER_ERROR_WORDS, type: 'server_error' }, model: UPSTREAM_MODEL, usage: UPSTREAM_USAGE }));
    return;
  }
  if (said === 'half an event first') {
    // The head and the start of an event at once, its end only once the caller has the head.
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: 'Hel' })).slice(0, 40)}`);
    await halfEvent.promise;
    response.write(`${JSON.stringify(chunk({ role: 'assistant', content: 'Hel' })).slice(40)}\n\n`);
    endStream(sseWriterless(response), response);
    return;
  }
  if (said === 'file usage' && recorded.body.stream !== true) {
    // A PDF's pages billed as their text and images: more tokens than the request has bytes.
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...completion('Read it.'), usage: { prompt_tokens: 5_000, completion_tokens: 10, total_tokens: 5_010 } }));
    return;
  }
  if (said === 'impossible usage' && recorded.body.stream !== true) {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...completion('Hello from the fake upstream.'), usage: IMPOSSIBLE_USAGE }));
    return;
  }
  if (said === 'fractional usage' && recorded.body.stream !== true) {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...completion('Hello from the fake upstream.'), usage: FRACTIONAL_USAGE }));
    return;
  }
  // An interim answer before the real one (103 Early Hints, as some CDNs in front of a provider
  // send): a client must wait for the final head.
  if (said === 'hints first') response.writeEarlyHints({ link: '</static/app.css>; rel=preload; as=style' });
  if (recorded.body.stream !== true) {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion('Hello from the fake upstream.')));
    return;
  }
  const send = sseWriter(response);
  send(chunk({ role: 'assistant', content: '' }));
  send(chunk({ content: 'Hello' }));
  send(chunk({ content: ' there' }));
  if (said === 'die mid-stream') {
    // Let what was written reach the gateway first, then drop the connection.
    await new Promise((resolve) => setTimeout(resolve, 50));
    response.socket?.destroy();
    return;
  }
  if (said === 'endless event') {
    await endlessEvent(response);
    return;
  }
  if (said === 'fractional usage' || said === 'impossible usage') {
    endStream(send, response, said === 'fractional usage' ? FRACTIONAL_USAGE : IMPOSSIBLE_USAGE);
    return;
  }
  if (said === 'usage on the finish chunk') {
    send({ ...chunk({}, 'stop'), usage: UPSTREAM_USAGE });
    send('[DONE]');
    response.end();
    return;
  }
  if (said === 'reset after done' || said === 'open after done') {
    send(chunk({}, 'stop'));
    send({ ...chunk({}), choices: [], usage: UPSTREAM_USAGE });
    send('[DONE]');
    // The answer is whole; then the connection resets before the body's end, or the body
    // stays open.
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (said === 'reset after done') response.socket?.destroy();
    else afterDone.openBodies.push(response);
    return;
  }
  if (said === 'not json mid-stream') {
    response.write('data: {not json at all\n\n');
    endStream(send, response);
    return;
  }
  if (said === 'named error event') {
    response.write('event: error\ndata: {"message":"overloaded"}\n\n');
    endStream(send, response);
    return;
  }
  if (said === 'error mid-stream') {
    send({ error: { message: 'The server had an error while processing your request.', type: 'server_error' } });
    response.end();
    return;
  }
  endStream(send, response);
}

/** Whether the gateway cut off 'endless event' before it was written to its end. */
export const endlessState = { cutOff: false };

// An event that never ends: data lines of 64 KiB, each followed by a keep-alive comment, and
// never the blank line that would end the event; up to 64 MiB, then the end. (A comment does
// not end an event: the parser still holds every data line.)
async function endlessEvent(response: ServerResponse): Promise<void> {
  endlessState.cutOff = false;
  let written = 0;
  const filler = `data: ${'y'.repeat(64 * 1024)}\n: keep-alive\n`;
  // One close listener for the whole run: a race of once(drain) and once(close) per write would
  // leave a listener behind every time.
  let wake = () => {};
  response.once('close', () => wake());
  while (written < 64 * 1024 * 1024) {
    if (response.destroyed) {
      endlessState.cutOff = true;
      return;
    }
    written += filler.length;
    if (!response.write(filler)) {
      let drained = () => {};
      await new Promise<void>((resolve) => {
        wake = drained = resolve;
        response.once('drain', drained);
      });
      response.off('drain', drained);
    }
  }
  response.end();
}

// A stream far larger than every socket buffer between the upstream and the caller, written as
// fast as the gateway takes it.
export const FLOOD_CHUNKS = 40_000;
export const floodState = { written: 0, finished: false };

async function flood(response: ServerResponse): Promise<void> {
  const send = sseWriter(response);
  const filler = 'x'.repeat(1_000);
  floodState.written = 0;
  floodState.finished = false;
  for (let index = 0; index < FLOOD_CHUNKS; index++) {
    const line = `data: ${JSON.stringify(chunk({ content: filler }))}\n\n`;
    floodState.written += line.length;
    if (!response.write(line)) await once(response, 'drain');
  }
  endStream(send, response);
  floodState.finished = true;
}

/** Two- and four-byte UTF-8 characters; SPLIT_TEXT's chunk is written a byte at a time. */
export const SPLIT_TEXT = 'Grüße 🌊 façade';

// Every byte of the chunk in a write of its own, apart in time, so the gateway reads the
// characters in pieces: each read must not be decoded alone.
async function splitCharacters(response: ServerResponse): Promise<void> {
  const send = sseWriter(response);
  send(chunk({ role: 'assistant', content: '' }));
  const bytes = Buffer.from(`data: ${JSON.stringify(chunk({ content: SPLIT_TEXT }))}\n\n`);
  for (let index = 0; index < bytes.length; index++) {
    response.write(bytes.subarray(index, index + 1));
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  endStream(send, response);
}

/** A gateway in front of the scripted upstream, with one funded caller: what the tests of
 * chat-upstream, upstream-usage-billing and upstream-refusals each start. */
export interface ScriptedChat {
  upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  stack: OpenAiStack;
  client: OpenAI;
  accountId: string;
  close(): Promise<void>;
}

export async function startScriptedChat(label: string, upstreamClient?: UpstreamClientOptions): Promise<ScriptedChat> {
  const upstream = await startFakeUpstream(answerScripted);
  const stack = await startApiBeforeUpstream(label, upstream.url, { upstreamChatModel: UPSTREAM_MODEL, ...(upstreamClient ? { upstreamClient } : {}) });
  const caller = await stack.newCaller(label);
  return {
    upstream,
    stack,
    client: stack.client(caller.key),
    accountId: caller.accountId,
    close: async () => {
      await stack.close();
      await upstream.close();
    },
  };
}
