import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { ClientDisconnect } from '../../../api/services/openai-proxy/client-disconnect.ts';
import { relayChatStream, type RelayOutcome } from '../../../api/services/openai-proxy/sse-relay.ts';

// The relay on its own, between an upstream body the test writes and a real HTTP response: for
// upstreams that keep a stream open without ending it.

const chunk = (delta: object, finish: string | null = null) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] });
const usageChunk = JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });

describe('SSE relay against upstreams that keep a stream open', () => {
  let server: Server;
  let url: string;
  /** What the next request relays: the upstream body the test writes to, and the outcome. */
  let next: { upstream: PassThrough; maxEventlessMs?: number; outcome?: Promise<RelayOutcome> };
  before(async () => {
    server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const relay = next;
      relay.outcome = relayChatStream({
        upstream: relay.upstream,
        response,
        signal: new ClientDisconnect(response),
        forwardUsage: false,
        modelId: 'm',
        ...(relay.maxEventlessMs !== undefined ? { maxEventlessMs: relay.maxEventlessMs } : {}),
      });
      void relay.outcome.then(() => response.end());
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(() => server.close());

  it('ends a whole answer at its usage chunk when the upstream sends no [DONE] and keeps its body open', { timeout: 5_000 }, async () => {
    const upstream = new PassThrough();
    next = { upstream };
    const started = performance.now();
    const response = await request(url);
    upstream.write(`data: ${chunk({ content: 'Hi' })}\n\ndata: ${chunk({}, 'stop')}\n\ndata: ${usageChunk}\n\n`);
    const text = await response.body.text();
    const outcome = await next.outcome!;
    assert.equal(outcome.end, 'completed');
    assert.deepEqual(outcome.usage, { inputTokens: 3, outputTokens: 2 });
    assert.ok(performance.now() - started < 1_500, 'answered without waiting for the body to end');
    assert.match(text, /"content":"Hi"/);
    assert.doesNotMatch(text, /usage/, 'the usage the caller did not ask for stays hidden');
    upstream.destroy();
  });

  it('drops a byte order mark before the first event, even one split across reads, and relays that event', { timeout: 5_000 }, async () => {
    const upstream = new PassThrough();
    next = { upstream };
    const response = await request(url);
    const bom = Buffer.from('\uFEFF', 'utf8');
    upstream.write(bom.subarray(0, 1));
    upstream.write(Buffer.concat([bom.subarray(1), Buffer.from(`data: ${chunk({ content: 'First' })}\n\ndata: ${chunk({ content: ' second' }, 'stop')}\n\n`)]));
    upstream.end();
    const text = await response.body.text();
    assert.equal((await next.outcome!).end, 'completed');
    assert.match(text, /"content":"First"/);
    assert.equal(text.includes('\uFEFF'), false);
  });

  it('ends a stream kept open with keep-alive comments alone, as a failure', { timeout: 5_000 }, async () => {
    const upstream = new PassThrough();
    next = { upstream, maxEventlessMs: 300 };
    const response = await request(url);
    upstream.write(`data: ${chunk({ content: 'Hi' })}\n\n`);
    const keepAlive = setInterval(() => upstream.write(': keep-alive\n\n'), 50);
    try {
      const outcome = await next.outcome!;
      assert.equal(outcome.end, 'upstream_failed');
      assert.match(outcome.failure ?? '', /sent no event for 0 s/);
    } finally {
      clearInterval(keepAlive);
    }
    await response.body.text();
    upstream.destroy();
  });
});

describe('SSE relay: what ends a finished answer', () => {
  let server: Server;
  let url: string;
  let upstream: PassThrough;
  let outcome: Promise<RelayOutcome>;
  /** The `n` of the next request. */
  let choices = 1;
  before(async () => {
    server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      outcome = relayChatStream({ upstream, response, signal: new ClientDisconnect(response), forwardUsage: false, modelId: 'm', choices });
      void outcome.then(() => response.end());
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(() => server.close());

  for (const [name, ending] of [
    ['a stray empty event after the finish', 'data:\n\n'],
    ['a [DONE] with a trailing space', 'data: [DONE] \n\n'],
  ] as const) {
    it(`takes ${name} as the end of a whole answer, not a failure`, { timeout: 5_000 }, async () => {
      choices = 1;
      upstream = new PassThrough();
      const response = await request(url);
      upstream.write(`data: ${chunk({ content: 'Hello there' })}\n\ndata: ${chunk({}, 'stop')}\n\n${ending}`);
      const text = await response.body.text();
      const ended = await outcome;
      assert.equal(ended.end, 'completed', JSON.stringify(ended));
      assert.match(text, /Hello there/);
      upstream.destroy();
    });
  }

  // Answers of several choices (n > 1): whole only once every choice started finished.
  const choiceChunk = (index: number, delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index, delta, finish_reason: finish }] })}\n\n`;
  // Choice 0 is whole, choice 1 is mid-answer.
  const oneOfTwoFinished = choiceChunk(0, { content: 'First' }) + choiceChunk(1, { content: 'Sec' }) + choiceChunk(0, {}, 'stop');

  for (const [name, ending, end] of [
    ['the body ends', '', 'upstream_failed'],
    ['an event that is not JSON comes', 'data: oops-not-json\n\n', 'upstream_failed'],
    ['the usage chunk comes and the body ends', `data: ${usageChunk}\n\n`, 'upstream_failed'],
    ['the other choice finishes and the body ends', choiceChunk(1, { content: 'ond' }) + choiceChunk(1, {}, 'stop'), 'completed'],
  ] as const) {
    it(`ends as ${end} when one choice of two finished and ${name}, without [DONE]`, { timeout: 5_000 }, async () => {
      choices = 2;
      upstream = new PassThrough();
      const response = await request(url);
      upstream.end(oneOfTwoFinished + ending);
      await response.body.text();
      const ended = await outcome;
      assert.equal(ended.end, end, JSON.stringify(ended));
    });
  }

  it('ends at the usage chunk once every choice finished, the body kept open', { timeout: 5_000 }, async () => {
    choices = 2;
    upstream = new PassThrough();
    const response = await request(url);
    upstream.write(oneOfTwoFinished + choiceChunk(1, {}, 'length') + `data: ${usageChunk}\n\n`);
    await response.body.text();
    assert.equal((await outcome).end, 'completed');
    upstream.destroy();
  });

  it('is not whole when a choice asked for never began, however the others ended', { timeout: 5_000 }, async () => {
    choices = 2;
    upstream = new PassThrough();
    const response = await request(url);
    upstream.end(choiceChunk(0, { content: 'Only one' }) + choiceChunk(0, {}, 'stop'));
    await response.body.text();
    assert.equal((await outcome).end, 'upstream_failed');
  });

  it('ends at a finishing chunk that carries the usage, the body kept open', { timeout: 5_000 }, async () => {
    choices = 1;
    upstream = new PassThrough();
    const response = await request(url);
    const finishWithUsage = JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    upstream.write(`data: ${chunk({ content: 'Hi' })}\n\ndata: ${finishWithUsage}\n\n`);
    await response.body.text();
    const ended = await outcome;
    assert.equal(ended.end, 'completed');
    assert.deepEqual(ended.usage, { inputTokens: 3, outputTokens: 2 });
    upstream.destroy();
  });
});
