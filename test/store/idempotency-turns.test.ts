import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Filter, UpdateFilter } from 'mongodb';
import { IdempotencyStore, type IdempotencyRecord } from '../../store/idempotency.ts';
import { ABANDONED_TURN_MS } from '../../store/idempotency-turns.ts';
import { StoreClock } from '../../store/store-clock.ts';
import { testDatabase } from '../helpers/engines.ts';

// The steps concurrent retries race for on an Idempotency-Key record: replacing an expired
// record, taking over a silent attempt's claim. FerretDB 1.24 runs a guarded write as a read
// and then a write by _id, with nothing between them isolated; these tests make that window
// happen at will in one store (whichever engine runs the suite), with a write that reads,
// waits for a gate, and writes by _id, as FerretDB does. Another retry then goes all the way
// through in the window: exactly one of the two may win.

/** A gate the emulated write stops at, once it has read its document. */
function gate() {
  let open!: () => void;
  let reached!: () => void;
  return {
    opened: new Promise<void>((resolve) => (open = resolve)),
    reached: new Promise<void>((resolve) => (reached = resolve)),
    open: () => open(),
    arrive: () => reached(),
  };
}

/** The store of a retry whose guarded writes are FerretDB's: a read, the gate, a write by _id. */
function unisolated(store: IdempotencyStore, at: ReturnType<typeof gate>): IdempotencyStore {
  const { collection } = store;
  const read = (filter: Filter<IdempotencyRecord>) => collection.findOne(filter);
  const write = collection.updateOne.bind(collection);
  const remove = collection.deleteOne.bind(collection);
  Object.assign(collection, {
    async updateOne(filter: Filter<IdempotencyRecord>, update: UpdateFilter<IdempotencyRecord>) {
      const found = await read(filter);
      at.arrive();
      await at.opened;
      return found ? write({ _id: found._id }, update) : { modifiedCount: 0 };
    },
    async deleteOne(filter: Filter<IdempotencyRecord>) {
      const found = await read(filter);
      at.arrive();
      await at.opened;
      return found ? remove({ _id: found._id }) : { deletedCount: 0 };
    },
  });
  return store;
}

/** A claim of the record made two minutes ago by an attempt that fell silent: its time. */
async function silentClaim(store: IdempotencyStore, id: string, taskId: string): Promise<Date> {
  const claimedAt = new Date(Date.now() - 120_000);
  await store.collection.insertOne({ _id: id, fingerprint: 'f', state: 'in_flight', task_id: taskId, created_at: claimedAt, refreshed_at: claimedAt, expires_at: new Date(claimedAt.getTime() + 86_400_000) });
  return claimedAt;
}

describe('Idempotency-Key steps that retries race for', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('idempotency_turns');
  });
  after(() => database.drop());

  it('lets one of two claims replace an expired record: the other finds its record', async () => {
    const id = 'key_turns:expired';
    const first = new IdempotencyStore(database.db);
    const old = new Date(Date.now() - 2 * 86_400_000);
    await first.collection.insertOne({ _id: id, fingerprint: 'f', state: 'completed', task_id: 'task_old', created_at: old, refreshed_at: old, expires_at: new Date(old.getTime() + 1_000) });
    const window = gate();
    const slow = unisolated(new IdempotencyStore(database.db), window);
    const now = new Date();
    const slowClaim = slow.claim({ id, fingerprint: 'f', taskId: 'task_slow', now });
    await window.reached;
    // The other claim runs while the slow one's delete has read the expired record.
    const fastClaim = first.claim({ id, fingerprint: 'f', taskId: 'task_fast', now });
    await new Promise((resolve) => setTimeout(resolve, 30));
    window.open();
    const claims = await Promise.all([slowClaim, fastClaim]);
    assert.deepEqual(claims.map((claim) => claim.kind).sort(), ['claimed', 'exists'], 'one claim, and one that found it');
    const winner = claims.find((claim) => claim.kind === 'claimed') as Extract<(typeof claims)[number], { kind: 'claimed' }>;
    assert.equal((await first.find(id))?.task_id, winner.record.task_id, "the winner's record is the one stored");
  });

  it('lets one of two retries take a silent attempt\'s claim over: the other is told one runs', async () => {
    const id = 'key_turns:silent';
    const first = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(first, id, 'task_silent');
    const window = gate();
    const slow = unisolated(new IdempotencyStore(database.db), window);
    const slowTake = slow.takeOver(id, claimedAt, new Date(), 'task_slow');
    await window.reached;
    const fastTake = await first.takeOver(id, claimedAt, new Date(Date.now() + 1), 'task_fast');
    window.open();
    const taken = [await slowTake, fastTake];
    assert.deepEqual(taken.filter(Boolean).length, 1, `exactly one retry took it over (${taken.join(', ')})`);
  });

  it("lets a silent holder's late release or completion touch nothing once a retry took its claim over", async () => {
    const id = 'key_turns:late-holder';
    const holder = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(holder, id, 'task_first');
    // The holder read its record as its own just before a retry took it over.
    const window = gate();
    const late = unisolated(new IdempotencyStore(database.db), window);
    const releasing = late.release(id, claimedAt);
    await window.reached;
    assert.equal(await holder.takeOver(id, claimedAt, new Date(), 'task_retry'), false, 'the holder is ending its claim right now');
    window.open();
    await releasing;
    // Taken over after all (the holder released it): a retry claims afresh.
    const retryAt = new Date();
    assert.equal((await holder.claim({ id, fingerprint: 'f', taskId: 'task_retry', now: retryAt })).kind, 'claimed');
    // The other way round: a retry took the claim over, then the silent holder wakes.
    const taken = new Date(Date.now() - 120_000);
    await holder.collection.updateOne({ _id: id }, { $set: { created_at: taken, refreshed_at: taken } });
    assert.equal(await holder.takeOver(id, taken, new Date(), 'task_third'), true);
    await holder.release(id, taken);
    await holder.complete(id, taken, { statusCode: 200, contentType: 'application/json', body: '{"late":true}' });
    const record = await holder.find(id);
    assert.deepEqual([record?.state, record?.task_id], ['in_flight', 'task_third'], "the retry's claim stands");
  });

  it("keeps a retry's recovered answer when the silent holder wakes and releases its claim", async () => {
    const id = 'key_turns:recovered';
    const store = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(store, id, 'task_ran');
    // A retry found the holder's task running and completes the claim with its answer.
    await store.complete(id, claimedAt, { statusCode: 200, contentType: 'application/json', body: '{"task_id":"task_ran"}' }, 'recover');
    // The holder wakes and, its own call having failed, releases, then (another path) completes.
    await store.release(id, claimedAt);
    await store.complete(id, claimedAt, { statusCode: 503, contentType: 'application/json', body: '{"error":{}}' });
    const record = await store.find(id);
    assert.deepEqual([record?.state, record?.body], ['completed', '{"task_id":"task_ran"}'], "the retry's answer stands: a next retry gets the same task");
  });

  it('drops the write of a taker whose turn grew old before it could write (a store that stalled it)', async () => {
    const id = 'key_turns:slow-taker';
    const store = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(store, id, 'task_silent');
    // A taker whose store call stalls 25 s between its turn and its write: its clock (the
    // store's, as it reads it) moves on meanwhile.
    let stalledMs = 0;
    const clock = { now: () => Date.now() + stalledMs, current: async () => Date.now() + stalledMs };
    const slow = new IdempotencyStore(database.db, clock as never);
    const insert = slow.turns.collection.insertOne.bind(slow.turns.collection);
    Object.assign(slow.turns.collection, {
      async insertOne(...args: Parameters<typeof insert>) {
        const inserted = await insert(...args);
        stalledMs = 25_000;
        return inserted;
      },
    });
    assert.equal(await slow.takeOver(id, claimedAt, new Date(), 'task_late'), false, 'a taker 25 s after its turn writes nothing');
    assert.equal((await store.find(id))?.task_id, 'task_silent');
  });

  it("does not record a retry's recovered answer while the woken holder is releasing its claim", async () => {
    const id = 'key_turns:recovering';
    const store = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(store, id, 'task_ran');
    const window = gate();
    const holder = unisolated(new IdempotencyStore(database.db), window);
    const releasing = holder.release(id, claimedAt);
    await window.reached;
    assert.equal(await store.complete(id, claimedAt, { statusCode: 200, contentType: 'application/json', body: '{"task_id":"task_ran"}' }, 'recover'), false, 'the retry is told to come back, not given an answer the release will delete');
    window.open();
    await releasing;
    assert.equal(await store.find(id), null);
  });

  it('lets the holder write its own ending again (a write it retries after the store refused it)', async () => {
    const id = 'key_turns:own-retry';
    const store = new IdempotencyStore(database.db);
    const claimedAt = new Date();
    assert.equal((await store.claim({ id, fingerprint: 'f', taskId: 'task_own', now: claimedAt })).kind, 'claimed');
    // Its first try took the turn, and the store refused the write itself.
    assert.ok(await store.turns.take('end', id, claimedAt));
    await store.complete(id, claimedAt, { statusCode: 200, contentType: 'application/json', body: '{"ok":true}' });
    assert.equal((await store.find(id))?.state, 'completed');
  });

  it('gives the step to the next retry when the one that took its turn died before the write', async () => {
    const id = 'key_turns:dead-taker';
    const store = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(store, id, 'task_silent');
    const takenAt = new Date(Date.now() - ABANDONED_TURN_MS - 1_000);
    await store.turns.collection.insertOne({ _id: `claim:${id}@${claimedAt.getTime()}#0`, step: 'take-over', at: takenAt, expires_at: new Date(Date.now() + 3_600_000) });
    assert.equal(await store.takeOver(id, claimedAt, new Date(), 'task_next'), true);
    assert.equal((await store.find(id))?.task_id, 'task_next');
    // A turn taken lately still stands.
    const again = (await store.find(id))!.created_at;
    await store.turns.collection.insertOne({ _id: `claim:${id}@${again.getTime()}#0`, step: 'take-over', at: new Date(), expires_at: new Date(Date.now() + 3_600_000) });
    assert.equal(await store.takeOver(id, again, new Date(), 'task_third'), false);
  });

  it("judges what has expired by the store's clock, not by the clock of the process that sweeps", async () => {
    const id = 'key_turns:swept-early';
    const store = new IdempotencyStore(database.db);
    const claimedAt = await silentClaim(store, id, 'task_swept');
    await store.current();
    assert.ok(await store.turns.take('take-over', id, claimedAt), 'a retry took the claim over');
    // A worker whose clock runs 25 hours ahead of the store's: its own time would delete both.
    const aheadOfTheStore = new IdempotencyStore(database.db, new StoreClock(database.db, () => Date.now() + 25 * 3_600_000));
    await aheadOfTheStore.deleteExpired();
    assert.equal((await aheadOfTheStore.find(id))?.task_id, 'task_swept', 'the record is within its 24 hours');
    assert.equal(await aheadOfTheStore.turns.collection.countDocuments({ _id: { $regex: `^claim:${id}@` } }), 1, 'the turn still decides the claim');
  });
});
