import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Pool } from 'undici';
import { ClientDisconnect } from '../../../api/services/openai-proxy/client-disconnect.ts';
import { AnswerBrokeOff, AnswerTooLarge, readWholeAnswer } from '../../../api/services/openai-proxy/whole-answer.ts';
import { asResponse, FakeCallerResponse } from '../../helpers/caller-response.ts';
import { waitUntil } from '../../helpers/wait-until.ts';

// readWholeAnswer against a real loopback server: answers read whole, answers bounded, answers
// that break off, and a caller who leaves while the answer is still coming.

const MEBIBYTE = 1024 * 1024;

function callerSignal(): { signal: ClientDisconnect; leave: () => void } {
  const response = new FakeCallerResponse();
  const signal = new ClientDisconnect(asResponse(response));
  return { signal, leave: () => response.emit('close') };
}

describe('reading an upstream answer whole', { timeout: 20_000 }, () => {
  let server: ReturnType<typeof createServer>;
  let pool: Pool;
  const closedMidway: string[] = [];
  const seen: string[] = [];

  before(async () => {
    server = createServer((request: IncomingMessage, response: ServerResponse) => {
      request.resume();
      seen.push(request.url!);
      const size = Number(new URL(request.url!, 'http://x').searchParams.get('mib') ?? '0') * MEBIBYTE;
      response.on('close', () => {
        if (!response.writableFinished) closedMidway.push(request.url!);
      });
      if (request.url!.startsWith('/break')) {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        response.write('{"half":');
        setTimeout(() => response.socket?.destroy(), 20);
        return;
      }
      if (request.url!.startsWith('/refuse-break')) {
        response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '7', 'content-length': '100' });
        response.write('{"error":{"message":"Rate limit');
        setTimeout(() => response.socket?.destroy(), 20);
        return;
      }
      if (request.url!.startsWith('/endless')) {
        // Until the reader hangs up (or 256 MiB, should it never).
        response.writeHead(200, { 'content-type': 'application/json' });
        const piece = 'z'.repeat(64 * 1024);
        let written = 0;
        const writeMore = () => {
          while (!response.destroyed && written < 256 * MEBIBYTE) {
            written += piece.length;
            if (!response.write(piece)) return void response.once('drain', writeMore);
          }
          if (!response.destroyed) response.end();
        };
        writeMore();
        return;
      }
      if (request.url!.startsWith('/slow')) {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('{"first":');
        return; // the rest never comes: the caller leaves first
      }
      response.writeHead(200, { 'content-type': 'application/json', 'retry-after': '3' });
      // 64 KiB writes, so the answer arrives in many pieces.
      const piece = 'x'.repeat(64 * 1024);
      let written = 0;
      const writeMore = () => {
        while (written < size) {
          written += piece.length;
          if (!response.write(piece)) return void response.once('drain', writeMore);
        }
        response.end();
      };
      writeMore();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    // destroy, not close: a request the code under test failed to stop would hold close forever.
    await pool.destroy();
    server.closeAllConnections();
    server.close();
  });

  const get = (path: string, signal: ClientDisconnect, maxBytes: number) => readWholeAnswer(pool, { method: 'GET', path }, signal, maxBytes);

  it('resolves with the whole text, the status and the headers', async () => {
    const { signal } = callerSignal();
    const answer = await get('/whole?mib=3', signal, 4 * MEBIBYTE);
    assert.equal(signal.listenerCount('abort'), 0);
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers['retry-after'], '3');
    assert.equal(answer.text.length, 3 * MEBIBYTE);
    assert.match(answer.text, /^x+$/);
  });

  it('cuts an answer off once it passes the bound, and stops reading it', async () => {
    const { signal } = callerSignal();
    await assert.rejects(get('/endless', signal, 1 * MEBIBYTE), (error: unknown) => {
      assert.ok(error instanceof AnswerTooLarge);
      assert.equal(error.maxBytes, MEBIBYTE);
      return true;
    });
    assert.equal(signal.listenerCount('abort'), 0);
    await waitUntil(() => closedMidway.includes('/endless'), 5_000);
    // The pool still answers afterwards.
    assert.equal((await get('/whole?mib=1', callerSignal().signal, 2 * MEBIBYTE)).text.length, MEBIBYTE);
  });

  it('tells an answer that broke off after its head apart from one that never came', async () => {
    const { signal } = callerSignal();
    await assert.rejects(get('/break', signal, MEBIBYTE), (error: unknown) => {
      assert.ok(error instanceof AnswerBrokeOff);
      assert.ok(!(error instanceof AnswerTooLarge));
      return true;
    });
    assert.equal(signal.listenerCount('abort'), 0);
    const nowhere = new Pool('http://127.0.0.1:1');
    try {
      await assert.rejects(readWholeAnswer(nowhere, { method: 'GET', path: '/' }, callerSignal().signal, MEBIBYTE), (error: unknown) => {
        assert.ok(!(error instanceof AnswerBrokeOff));
        assert.equal((error as { code?: string }).code, 'ECONNREFUSED');
        return true;
      });
    } finally {
      await nowhere.close();
    }
  });

  it('keeps the status and Retry-After of a refusal whose body broke off', async () => {
    const answer = await get('/refuse-break', callerSignal().signal, MEBIBYTE);
    assert.equal(answer.statusCode, 429);
    assert.equal(answer.headers['retry-after'], '7');
    // Half a message is not shown to anyone.
    assert.equal(answer.text, '');
  });

  it('stops the request when the caller leaves mid-answer, rejecting with the reason', async () => {
    const { signal, leave } = callerSignal();
    const reading = get('/slow', signal, MEBIBYTE);
    await waitUntil(() => seen.includes('/slow'), 5_000);
    // The head and the first bytes are on their way: leave while the answer is being read.
    await new Promise((resolve) => setTimeout(resolve, 100));
    leave();
    await assert.rejects(reading, (error: unknown) => {
      assert.ok(!(error instanceof AnswerBrokeOff));
      assert.match(String((error as Error).message), /client disconnected/);
      return true;
    });
    assert.equal(signal.listenerCount('abort'), 0);
    await waitUntil(() => closedMidway.includes('/slow'), 5_000);
  });

  it('answers a caller who leaves while the request waits for a connection at once', async () => {
    const single = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 1 });
    try {
      const first = callerSignal();
      const occupying = readWholeAnswer(single, { method: 'GET', path: '/slow?occupy' }, first.signal, MEBIBYTE);
      await waitUntil(() => seen.includes('/slow?occupy'), 5_000);
      const queued = callerSignal();
      const waiting = readWholeAnswer(single, { method: 'GET', path: '/whole?mib=1&queued' }, queued.signal, MEBIBYTE);
      queued.leave();
      await assert.rejects(waiting, /client disconnected/);
      assert.equal(queued.signal.listenerCount('abort'), 0);
      first.leave();
      await assert.rejects(occupying, /client disconnected/);
      // The next request on the one connection is served after the queued one would have been:
      // once it is answered, the queued one was dropped, never sent.
      assert.equal((await readWholeAnswer(single, { method: 'GET', path: '/whole?mib=1&after' }, callerSignal().signal, 2 * MEBIBYTE)).statusCode, 200);
      assert.ok(seen.includes('/whole?mib=1&after'));
      assert.ok(!seen.includes('/whole?mib=1&queued'));
    } finally {
      await single.destroy();
    }
  });

  it('answers a caller who already left without sending anything', async () => {
    const { signal, leave } = callerSignal();
    leave();
    await assert.rejects(get('/whole?mib=1&gone', signal, MEBIBYTE), /client disconnected/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(!seen.includes('/whole?mib=1&gone'));
    assert.equal(signal.listenerCount('abort'), 0);
  });

  it('leaves the send time unset when the connection fails while being set up', async () => {
    // Accepts TCP, never answers the TLS handshake, and drops the connection after 300 ms.
    const silent = createNetServer((socket) => setTimeout(() => socket.destroy(), 300));
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const tls = new Pool(`https://127.0.0.1:${(silent.address() as AddressInfo).port}`);
    try {
      const unsent = callerSignal().signal;
      await assert.rejects(readWholeAnswer(tls, { method: 'GET', path: '/' }, unsent, MEBIBYTE), (error: unknown) => {
        assert.ok(!(error instanceof AnswerBrokeOff));
        return true;
      });
      // Never sent: the retry rule may repeat it however long the setup took.
      assert.equal(unsent.sentAt, undefined);
      assert.equal(unsent.requestSent, false);
      const sent = callerSignal().signal;
      await readWholeAnswer(pool, { method: 'GET', path: '/whole?mib=1&timed2' }, sent, 2 * MEBIBYTE);
      assert.equal(typeof sent.sentAt, 'number');
      assert.equal(sent.requestSent, true);
    } finally {
      await tls.destroy();
      silent.close();
    }
  });

  it('removes its listener when the pool refuses the request outright', async () => {
    const closed = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    await closed.close();
    const { signal } = callerSignal();
    await assert.rejects(readWholeAnswer(closed, { method: 'GET', path: '/whole' }, signal, MEBIBYTE), /closed|destroyed/i);
    assert.equal(signal.listenerCount('abort'), 0);
  });
});
