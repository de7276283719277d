import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { request } from 'undici';
import { errorHandler } from '../../api/plugins/error-handler.ts';
import { gracefulClose } from '../../api/plugins/graceful-close.ts';
import { CallsInFlight } from '../../api/services/openai-proxy/calls-in-flight.ts';
import { idempotency, outcomeUnknown, retryAfterSeconds } from '../../api/plugins/idempotency.ts';
import { GatewayError } from '../../core/errors.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { testDatabase } from '../helpers/engines.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// How the Idempotency-Key plugin tells a first attempt that is still running from one that is
// gone, on the real store, with stale windows short enough to watch: a running request keeps
// its record refreshed, so a duplicate is a 409 however long it runs; a record nobody refreshes
// is taken over; a caller who leaves a request that gives its socket up frees the key at once.
// The routes here wait as long as each request asks, as a slow image model does.

const STALE_MS = 600;

/** The real store, made to refuse the next `failures` completions (a store outage as a
 * request ends), and to take `refreshMs` longer over each refresh, noting the order of writes. */
class StoreRefusingCompletions extends IdempotencyStore {
  failures = 0;
  refreshMs = 0;
  /** Refreshes of attempts that claimed their record before this fail (the store out of reach
   * of their process): their records go stale. */
  refuseRefreshesClaimedBefore = new Date(0);
  readonly writes: string[] = [];
  /** The next take-over loses to another retry's. */
  loseTakeOver = false;
  override async takeOver(...args: Parameters<IdempotencyStore['takeOver']>): ReturnType<IdempotencyStore['takeOver']> {
    if (this.loseTakeOver) {
      this.loseTakeOver = false;
      return false;
    }
    return super.takeOver(...args);
  }

  override async complete(...args: Parameters<IdempotencyStore['complete']>): ReturnType<IdempotencyStore['complete']> {
    if (this.failures > 0) {
      this.failures--;
      throw new Error('store unreachable');
    }
    this.writes.push('complete');
    return super.complete(...args);
  }

  override async refresh(...args: Parameters<IdempotencyStore['refresh']>): ReturnType<IdempotencyStore['refresh']> {
    await new Promise((resolve) => setTimeout(resolve, this.refreshMs));
    if (args[1] < this.refuseRefreshesClaimedBefore) throw new Error('store unreachable');
    const result = await super.refresh(...args);
    this.writes.push('refresh');
    return result;
  }
}

describe('Idempotency-Key records of requests still running', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let store: StoreRefusingCompletions;
  let app: FastifyInstance;
  let origin: string;
  const runs = new Map<string, number>();

  before(async () => {
    database = await testDatabase('idempotency_refresh');
    store = new StoreRefusingCompletions(database.db);
    app = Fastify();
    await app.register(errorHandler);
    app.decorateRequest('principal', null);
    app.addHook('onRequest', async (incoming) => {
      incoming.principal = { accountId: 'acct_refresh', keyId: 'key_refresh', models: null };
    });
    await app.register(idempotency, {
      store,
      routes: { '/work': { staleAfterMs: STALE_MS }, '/cancellable': { staleAfterMs: 60_000 }, '/unsure': { staleAfterMs: STALE_MS } },
    });
    // Runs for x-work-ms (a header: not part of the body the key is bound to); a caller who
    // leaves first gets nothing, as the image route does.
    const work = async (incoming: FastifyRequest, reply: FastifyReply) => {
      const { name } = incoming.body as { name: string };
      const ms = Number(incoming.headers['x-work-ms'] ?? 0);
      runs.set(name, (runs.get(name) ?? 0) + 1);
      const left = await new Promise<boolean>((resolve) => {
        if (reply.raw.destroyed) return resolve(true);
        const timer = setTimeout(() => resolve(false), ms);
        reply.raw.once('close', () => {
          clearTimeout(timer);
          resolve(!reply.raw.writableFinished);
        });
      });
      if (left) return reply.hijack();
      if (incoming.headers['x-fail'] !== undefined) return reply.code(502).send({ error: { message: 'upstream failed', type: 'api_error', code: 'upstream_error' } });
      return { name, run: runs.get(name) };
    };
    app.post('/work', work);
    app.post('/cancellable', work);
    // Fails once per name in a way that may yet have its effect (a video task whose start
    // Temporal may have recorded after all), then works.
    app.post('/unsure', async (incoming) => {
      const { name } = incoming.body as { name: string };
      runs.set(name, (runs.get(name) ?? 0) + 1);
      if (runs.get(name) === 1) throw outcomeUnknown(new GatewayError('service_unavailable', 'maybe started'));
      return { name, run: runs.get(name) };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await app.close();
    await database.drop();
  });

  const call = (path: string, key: string, name: string, ms = 0, extra: Record<string, string> = {}) =>
    request(`${origin}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-work-ms': String(ms), ...extra }, body: JSON.stringify({ name }) });

  it('refuses a duplicate of a request that runs for many stale windows, then replays its answer', async () => {
    const first = call('/work', 'slow-key', 'slow', 5 * STALE_MS);
    // Twice the stale window after the claim: judged by its claim alone, the first attempt
    // would count as abandoned now and the duplicate would run (and be charged) again.
    await new Promise((resolve) => setTimeout(resolve, 2 * STALE_MS));
    const record = await store.collection.findOne({ state: 'in_flight' });
    assert.ok(record?.refreshed_at, 'the running request has refreshed its record');
    assert.ok(record.refreshed_at.getTime() - record.created_at.getTime() >= STALE_MS, `refreshed ${record.refreshed_at.getTime() - record.created_at.getTime()} ms after the claim`);

    const duplicate = await call('/work', 'slow-key', 'slow');
    assert.equal(duplicate.statusCode, 409, await duplicate.body.text());
    const answered = await first;
    assert.equal(answered.statusCode, 200);
    const firstAnswer = await answered.body.json();
    assert.deepEqual(firstAnswer, { name: 'slow', run: 1 });

    const replayed = await call('/work', 'slow-key', 'slow');
    assert.equal(replayed.statusCode, 200);
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    assert.deepEqual(await replayed.body.json(), firstAnswer);
    assert.equal(runs.get('slow'), 1, 'the work ran once');
  });

  it('judges a record abandoned by its last refresh, not by its claim', async () => {
    assert.equal((await call('/work', 'orphan-key', 'orphan')).statusCode, 200);
    // Claimed long ago and refreshed a moment ago: still running.
    const now = Date.now();
    const recordId = `key_refresh:${createHash('sha256').update('orphan-key').digest('hex')}`;
    await store.collection.updateOne(
      { _id: recordId, state: 'completed' },
      { $set: { state: 'in_flight', created_at: new Date(now - 10 * STALE_MS), refreshed_at: new Date(now - STALE_MS / 3) }, $unset: { body: '', status_code: '' } },
    );
    const tooSoon = await call('/work', 'orphan-key', 'orphan');
    assert.equal(tooSoon.statusCode, 409, 'refreshed within the window: still running');
    // Refreshed lately, so likely running: come back in a second.
    assert.equal(tooSoon.headers['retry-after'], '1');
    await tooSoon.body.dump();
    // Silent for most of a window: likely cut off with its process, to be taken over once the
    // window is out (a video submission's is 30 s).
    assert.deepEqual([retryAfterSeconds(30_000, 5_000), retryAfterSeconds(30_000, 24_200), retryAfterSeconds(30_000, 29_900)], [1, 6, 1]);
    // Its process died: no refresh for longer than the window.
    await store.collection.updateOne({ _id: recordId }, { $set: { refreshed_at: new Date(now - 2 * STALE_MS) } });
    // Two retries race to take it over: the one that loses is told to come back in a second.
    store.loseTakeOver = true;
    const lost = await call('/work', 'orphan-key', 'orphan');
    assert.equal(lost.statusCode, 409);
    assert.equal(lost.headers['retry-after'], '1');
    assert.match(((await lost.body.json()) as { error: { message: string } }).error.message, /already in progress/);
    const retried = await call('/work', 'orphan-key', 'orphan');
    const text = await retried.body.text();
    assert.equal(retried.statusCode, 200, text);
    assert.equal(retried.headers['idempotent-replayed'], undefined, 'run again, not replayed');
    assert.deepEqual(JSON.parse(text), { name: 'orphan', run: 2 });
  });

  it('keeps the record of an error whose work may still happen in flight: a retry waits for it to go stale, then recovers', async () => {
    const first = await call('/unsure', 'unsure-key', 'unsure');
    assert.equal(first.statusCode, 503, await first.body.text());
    // Let go, the key would run the work again at once beside work that may be happening.
    const tooSoon = await call('/unsure', 'unsure-key', 'unsure');
    assert.equal(tooSoon.statusCode, 409, await tooSoon.body.text());
    assert.equal(runs.get('unsure'), 1);
    const record = await store.collection.findOne({ _id: `key_refresh:${createHash('sha256').update('unsure-key').digest('hex')}` });
    assert.equal(record?.state, 'in_flight');
    // No longer refreshed: stale after the window, when a retry asks the route's recover (here
    // none: it runs again).
    await new Promise((resolve) => setTimeout(resolve, STALE_MS + 100));
    const recovered = await call('/unsure', 'unsure-key', 'unsure');
    assert.equal(recovered.statusCode, 200, await recovered.body.text());
    assert.equal(runs.get('unsure'), 2);
  });

  it('answers when the store cannot keep the answer, and keeps it once the store is back', async () => {
    store.failures = 2;
    const answered = await call('/work', 'flaky-key', 'flaky');
    const text = await answered.body.text();
    assert.equal(answered.statusCode, 200, text);
    assert.deepEqual(JSON.parse(text), { name: 'flaky', run: 1 });
    // Written on the third try (0.25 s, then 0.5 s later), after which a retry is replayed.
    await waitUntil(async () => (await store.collection.countDocuments({ state: 'completed', 'body': text })) === 1, 3_000);
    assert.equal(store.failures, 0);
    const replayed = await call('/work', 'flaky-key', 'flaky');
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    assert.deepEqual(await replayed.body.json(), { name: 'flaky', run: 1 });
    assert.equal(runs.get('flaky'), 1, 'the work ran once');
  });

  it('writes an answer the store refused before the close it met finishes', async () => {
    // An api closing (a restart) right after a store blip: the record's write is retried in the
    // background, and the store closes once the app has; unwaited, the record stayed in_flight,
    // and a retry under the key would run (and pay) again once it went stale.
    const calls = new CallsInFlight();
    const closing = Fastify();
    closing.decorateRequest('principal', null);
    closing.addHook('onRequest', async (incoming) => {
      incoming.principal = { accountId: 'acct_refresh', keyId: 'key_refresh', models: null };
    });
    await closing.register(gracefulClose, { calls, graceMs: 5_000 });
    await closing.register(idempotency, { store, routes: { '/work': { staleAfterMs: STALE_MS } }, calls });
    closing.post('/work', async () => ({ closing: true }));
    await closing.listen({ host: '127.0.0.1', port: 0 });
    // The first write and eleven retries fail (a store back about 3 s into the close): at the
    // usual pauses the retries would run past the close's force deadline (7 s), and the eight of
    // them ran out at 250 ms each; the close shortens the pauses, not how long they go on.
    store.failures = 12;
    const answered = await request(`http://127.0.0.1:${(closing.server.address() as AddressInfo).port}/work`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'closing-key' }, body: '{}' });
    assert.equal(answered.statusCode, 200);
    const text = await answered.body.text();
    const started = Date.now();
    await closing.close();
    assert.equal(store.failures, 0, 'every refused write was tried');
    assert.equal(await store.collection.countDocuments({ state: 'completed', body: text }), 1, 'the record was written before the close finished');
    assert.ok(Date.now() - started < 6_000, `closed after ${Date.now() - started} ms`);
  });

  it('writes the answer after a refresh still on its way, not under it', async () => {
    // On FerretDB a refresh landing after the answer could carry `in_flight` back over it.
    store.refreshMs = 250;
    store.writes.length = 0;
    // The first refresh starts at a third of the window (200 ms) and lands 250 ms later; the
    // answer is ready in between.
    const answered = await call('/work', 'overlap-key', 'overlap', STALE_MS / 3 + 50);
    assert.equal(answered.statusCode, 200);
    store.refreshMs = 0;
    assert.deepEqual(store.writes.slice(0, 2), ['refresh', 'complete']);
    const replayed = await call('/work', 'overlap-key', 'overlap');
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
  });

  // An attempt whose process lost the store for longer than the window is taken over by a
  // retry while it still runs; when it ends, its answer or its release must leave the retry's
  // record alone.
  for (const ending of ['fails', 'succeeds'] as const) {
    it(`leaves a retry's record alone when the attempt it took over ${ending} afterwards`, async () => {
      const name = `taken-over-${ending}`;
      const key = `${name}-key`;
      store.refuseRefreshesClaimedBefore = new Date(8.64e15);
      const first = call('/work', key, name, 3 * STALE_MS, ending === 'fails' ? { 'x-fail': '1' } : {});
      await new Promise((resolve) => setTimeout(resolve, STALE_MS + 200));
      // From here on only the first attempt's refreshes fail.
      store.refuseRefreshesClaimedBefore = store.now();
      const retry = call('/work', key, name, 6 * STALE_MS);
      const firstAnswer = await first;
      assert.equal(firstAnswer.statusCode, ending === 'fails' ? 502 : 200, await firstAnswer.body.text());
      await new Promise((resolve) => setTimeout(resolve, 300));
      // The retry still runs and keeps its record: a third call is refused, not run again, and
      // not answered with the first attempt's answer.
      const third = await call('/work', key, name);
      assert.equal(third.statusCode, 409, await third.body.text());
      const retried = await retry;
      const retriedAnswer = await retried.body.json();
      assert.deepEqual(retriedAnswer, { name, run: 2 });
      const replayed = await call('/work', key, name);
      assert.equal(replayed.headers['idempotent-replayed'], 'true');
      assert.deepEqual(await replayed.body.json(), retriedAnswer, "the retry's answer is the one kept");
      assert.equal(runs.get(name), 2, 'the first attempt and its retry ran, nothing more');
      store.refuseRefreshesClaimedBefore = new Date(0);
    });
  }

  it('frees the key as soon as a caller leaves a request that gives its socket up', async () => {
    const payload = JSON.stringify({ name: 'left' });
    const { port } = new URL(origin);
    const leaving = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/cancellable', headers: { 'content-type': 'application/json', 'idempotency-key': 'left-key', 'x-work-ms': '30000', 'content-length': Buffer.byteLength(payload) } });
    leaving.on('error', () => undefined);
    leaving.end(payload);
    await waitUntil(async () => (await store.collection.countDocuments({ state: 'in_flight' })) === 1);
    leaving.destroy();
    // Well inside the route's 60 s stale window: only a released record lets the retry run.
    await waitUntil(async () => (await store.collection.countDocuments({ state: 'in_flight' })) === 0, 2_000);
    const retried = await call('/cancellable', 'left-key', 'left');
    const text = await retried.body.text();
    assert.equal(retried.statusCode, 200, text);
    assert.deepEqual(JSON.parse(text), { name: 'left', run: 2 });
  });
});
