import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { GatewayError } from '../../core/errors.ts';
import { errorHandler } from '../../api/plugins/error-handler.ts';
import { idempotency } from '../../api/plugins/idempotency.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { testDatabase } from '../helpers/engines.ts';

// A route that would refuse at once (a video submission whose account's hold queue is stalled)
// refuses a key without a record before claiming it: a claim refused afterwards costs the store
// an insert and a delete, and a burst of retried submissions made thousands of them while the
// store was already the bottleneck (a chaos review). A key with a record still gets its answer.

/** The real store, counting the writes of claims and releases. */
class CountingStore extends IdempotencyStore {
  claims = 0;
  releases = 0;
  /** The store is slow to answer a look at a record (what likely stalls the queue). */
  findHangs = false;
  override async find(...args: Parameters<IdempotencyStore['find']>): ReturnType<IdempotencyStore['find']> {
    if (this.findHangs) await new Promise((resolve) => setTimeout(resolve, 5_000));
    return super.find(...args);
  }

  override async claim(...args: Parameters<IdempotencyStore['claim']>): ReturnType<IdempotencyStore['claim']> {
    this.claims++;
    return super.claim(...args);
  }

  override async release(...args: Parameters<IdempotencyStore['release']>): ReturnType<IdempotencyStore['release']> {
    this.releases++;
    return super.release(...args);
  }
}

describe('Idempotency-Key claims of requests the route refuses at once', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let store: CountingStore;
  let app: FastifyInstance;
  let refusing = false;
  let runs = 0;

  before(async () => {
    database = await testDatabase('idempotency_refusal');
    store = new CountingStore(database.db);
    app = Fastify();
    await app.register(errorHandler);
    app.decorateRequest('principal', null);
    app.addHook('onRequest', async (incoming) => {
      incoming.principal = { accountId: 'acct_refusal', keyId: 'key_refusal', models: null };
    });
    const refuse = () => {
      if (refusing) throw new GatewayError('service_unavailable', 'The queue is stalled (test).', undefined, { 'retry-after': '2' });
    };
    await app.register(idempotency, { store, routes: { '/submit': { staleAfterMs: 30_000, refuseBeforeClaim: refuse } } });
    app.post('/submit', async (request) => {
      refuse();
      runs++;
      return { ran: (request.body as { name: string }).name };
    });
  });
  after(async () => {
    await app.close();
    await database.drop();
  });

  const submit = (key: string, name: string) => app.inject({ method: 'POST', url: '/submit', payload: { name }, headers: { 'idempotency-key': key } });

  it('refuses a new key without claiming it, and still replays a key that has its answer', async () => {
    refusing = true;
    const refused = await submit('fresh', 'a');
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.headers['retry-after'], '2');
    assert.deepEqual({ claims: store.claims, releases: store.releases, runs }, { claims: 0, releases: 0, runs: 0 }, 'no record was written for the refusal');
    assert.equal(await store.collection.countDocuments({}), 0);

    refusing = false;
    const answered = await submit('answered', 'b');
    assert.equal(answered.statusCode, 200);
    assert.equal(store.claims, 1);

    refusing = true;
    const replayed = await submit('answered', 'b');
    assert.equal(replayed.statusCode, 200, replayed.body);
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    assert.deepEqual(replayed.json(), { ran: 'b' });
    assert.equal(runs, 1, 'the replay did not run the route');
    // Another body under that key is still told so, not refused for the queue.
    assert.equal((await submit('answered', 'c')).statusCode, 422);

    // A store slow to show the record: the queue's refusal, without waiting for it.
    store.findHangs = true;
    const started = performance.now();
    assert.equal((await submit('answered', 'b')).statusCode, 503);
    assert.ok(performance.now() - started < 2_000, 'refused without waiting for the store');
    store.findHangs = false;

    refusing = false;
    assert.equal((await submit('fresh', 'a')).statusCode, 200, 'the refused key is free for the retry');
  });
});
