import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

// A minimal OpenAI-compatible chat upstream for bench/chat-proxy.ts, with exact delays the
// simulator does not promise. Run as its own process (so the load generator and the proxies
// under test do not share its event loop): `node --import tsx bench/lib/loopback-upstream.ts`;
// it prints `READY <port>` once it listens on 127.0.0.1.
//
// Steered by markers in the last message's content, so every proxy passes them on unchanged:
//   [up:delay=N]  answer (non-stream) after N ms; default 0.
//   stream: true  64 chunks (override with [up:chunks=N]), the first at once and the others
//                 [up:gap=N] ms apart (default 20), measured from the first so timer drift does
//                 not add up; then a usage chunk when stream_options.include_usage, then [DONE].

const CREATED = Math.floor(Date.now() / 1000);
let sequence = 0;

function marker(text: string, name: string, fallback: number): number {
  const match = new RegExp(`\\[up:${name}=(\\d+)\\]`).exec(text);
  return match ? Number(match[1]) : fallback;
}

function lastContent(body: any): string {
  const last = Array.isArray(body?.messages) ? body.messages.at(-1) : undefined;
  return typeof last?.content === 'string' ? last.content : '';
}

function send(response: ServerResponse, status: number, payload: unknown): void {
  const text = JSON.stringify(payload);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

function completion(body: any) {
  return {
    id: `chatcmpl-up${++sequence}`,
    object: 'chat.completion',
    created: CREATED,
    model: String(body.model ?? 'gpt-4o-mini'),
    choices: [{ index: 0, message: { role: 'assistant', content: 'pong' }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 },
  };
}

function stream(body: any, response: ServerResponse, content: string): void {
  const chunks = marker(content, 'chunks', 64);
  const gapMs = marker(content, 'gap', 20);
  const id = `chatcmpl-up${++sequence}`;
  const model = String(body.model ?? 'gpt-4o-mini');
  const frame = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, choices, ...extra })}\n\n`;
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const started = performance.now();
  let index = 0;
  let closed = false;
  response.on('close', () => (closed = true));
  const next = () => {
    if (closed) return;
    const delta = index === 0 ? { role: 'assistant', content: 't0' } : { content: ` t${index}` };
    const last = index === chunks - 1;
    response.write(frame([{ index: 0, delta, logprobs: null, finish_reason: last ? 'stop' : null }]));
    index++;
    if (!last) {
      setTimeout(next, Math.max(0, started + index * gapMs - performance.now()));
      return;
    }
    if (body.stream_options?.include_usage) {
      response.write(frame([], { usage: { prompt_tokens: 8, completion_tokens: chunks, total_tokens: 8 + chunks } }));
    }
    response.end('data: [DONE]\n\n');
  };
  next();
}

function handle(incoming: IncomingMessage, response: ServerResponse): void {
  const parts: Buffer[] = [];
  incoming.on('data', (part: Buffer) => parts.push(part));
  incoming.on('end', () => {
    const path = (incoming.url ?? '').split('?')[0];
    if (incoming.method === 'GET' && path === '/v1/models') {
      send(response, 200, { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: CREATED, owned_by: 'bench' }] });
      return;
    }
    if (incoming.method !== 'POST' || path !== '/v1/chat/completions') {
      send(response, 404, { error: { message: `no ${incoming.method} ${path}`, type: 'invalid_request_error' } });
      return;
    }
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(parts).toString('utf8'));
    } catch {
      send(response, 400, { error: { message: 'invalid JSON', type: 'invalid_request_error' } });
      return;
    }
    const content = lastContent(body);
    if (body.stream) {
      stream(body, response, content);
      return;
    }
    const delayMs = marker(content, 'delay', 0);
    if (delayMs === 0) send(response, 200, completion(body));
    else setTimeout(() => send(response, 200, completion(body)), delayMs);
  });
}

const server = createServer({ keepAliveTimeout: 60_000 }, handle);
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  process.stdout.write(`READY ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
