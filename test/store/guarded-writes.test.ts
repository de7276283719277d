import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Collection } from 'mongodb';
import { GuardedWrites, meetsGuard } from '../../store/guarded-writes.ts';
import { TaskStore } from '../../store/tasks.ts';
import { testDatabase } from '../helpers/engines.ts';
import { watchedDatabase, type WatchedDatabase } from '../helpers/watched-database.ts';

// Writes that must happen only while a document still reads as expected. On FerretDB a filter
// naming anything beside _id makes it read the collection in Go (0.4 s a write at 15,000
// documents), so there the guard is checked on a read by _id and the write is by _id alone; on
// MongoDB the guard stays in the write's filter, one atomic command.

interface Doc {
  _id: string;
  state?: string;
  created_at?: Date;
  progress?: number;
  webhook?: { state: string };
}

describe('guarded writes', () => {
  let shared: Awaited<ReturnType<typeof testDatabase>>;
  let watched: WatchedDatabase;
  let ferretDb: boolean;
  before(async () => {
    shared = await testDatabase('guarded_writes');
    watched = await watchedDatabase(shared);
    ferretDb = typeof (await shared.db.admin().command({ buildInfo: 1 })).ferretdbVersion === 'string';
  });
  after(async () => {
    await watched.close();
    await shared.drop();
  });

  /** The filters of the updates and deletes sent since `from`. */
  const writeFilters = (from: number) =>
    watched.writes.slice(from).flatMap((event) => {
      const command = event.command as { updates?: Array<{ q: Record<string, unknown> }>; deletes?: Array<{ q: Record<string, unknown> }> };
      return (command.updates ?? command.deletes ?? []).map((statement) => statement.q);
    });

  it('judges a guard as the store judges the same filter', () => {
    const at = new Date(1_000);
    const document = { _id: 'a', state: 'in_flight', created_at: new Date(1_000), progress: 40, webhook: { state: 'pending' } };
    assert.equal(meetsGuard(document, { state: 'in_flight', created_at: at }), true, 'a Date equals a Date of the same time');
    assert.equal(meetsGuard(document, { created_at: new Date(1_001) }), false);
    assert.equal(meetsGuard(document, { state: { $in: ['submitted', 'in_flight'] } }), true);
    assert.equal(meetsGuard(document, { state: { $in: ['submitted'] } }), false);
    assert.equal(meetsGuard(document, { progress: { $lt: 50 } }), true);
    assert.equal(meetsGuard(document, { progress: { $lt: 40 } }), false);
    assert.equal(meetsGuard({ _id: 'b' }, { progress: { $lt: 40 } }), false, 'a missing field is not less than anything');
    assert.equal(meetsGuard(document, { 'webhook.state': 'pending' }), true);
    assert.equal(meetsGuard({ _id: 'c' }, { 'webhook.state': 'pending' }), false);
    assert.throws(() => meetsGuard(document, { progress: { $gt: 1 } }), /\$gt/);
  });

  for (const store of ['ferretdb', 'mongodb'] as const) {
    it(`writes only while the guard holds: ${store === 'ferretdb' ? 'read by _id, then written by _id alone' : 'the guard in the write filter'} (the ${store} way)`, async () => {
      const collection = watched.db.collection<Doc>(`guarded_${store}`);
      const writes = new GuardedWrites(watched.db, store);
      const claimedAt = new Date(5_000);
      await collection.insertMany([
        { _id: 'kept', state: 'in_flight', created_at: claimedAt },
        { _id: 'taken_over', state: 'in_flight', created_at: new Date(6_000) },
      ]);
      const from = watched.writes.length;
      assert.equal(await writes.updateOne(collection, 'kept', { state: 'in_flight', created_at: claimedAt }, { $set: { state: 'completed' } }), true);
      assert.equal(await writes.updateOne(collection, 'kept', { state: 'in_flight', created_at: claimedAt }, { $set: { state: 'again' } }), false, 'the guard no longer holds');
      assert.equal(await writes.deleteOne(collection, 'taken_over', { state: 'in_flight', created_at: claimedAt }), false, 'another attempt holds it');
      assert.equal(await writes.deleteOne(collection, 'missing', { state: 'in_flight' }), false);
      assert.equal(await writes.deleteOne(collection, 'taken_over', { created_at: new Date(6_000) }), true);
      assert.deepEqual(await collection.find({}).toArray(), [{ _id: 'kept', state: 'completed', created_at: claimedAt }]);
      const filters = writeFilters(from);
      if (store === 'ferretdb') {
        // Writes whose guard failed on the read were never sent.
        assert.deepEqual(filters, [{ _id: 'kept' }, { _id: 'taken_over' }]);
      } else {
        assert.equal(filters.length, 5);
        assert.deepEqual(filters[0], { _id: 'kept', state: 'in_flight', created_at: claimedAt });
      }
    });
  }

  it("never lowers a task's progress when the guard went stale between the read and the write (the ferretdb way)", async () => {
    const tasks = new TaskStore(watched.db);
    const collection = tasks.collection as unknown as Collection<Doc & { status: string }>;
    await collection.insertOne({ _id: 'task_stale_guard', status: 'running', progress: 20 });
    // Another attempt's write of 80 lands just after this one read 20.
    const read = collection.findOne.bind(collection);
    Object.assign(collection, {
      async findOne(...args: Parameters<typeof read>) {
        const found = await read(...args);
        await watched.db.collection<Doc>('tasks').updateOne({ _id: 'task_stale_guard' }, { $set: { progress: 80 } });
        return found;
      },
    });
    (tasks as unknown as { guarded: GuardedWrites }).guarded = new GuardedWrites(watched.db, 'ferretdb');
    await tasks.updateProgress('task_stale_guard', 50);
    assert.equal((await read({ _id: 'task_stale_guard' }))?.progress, 80);
  });

  it("sends a task's progress and vendor id through it, and keeps the guard of its status writes in the filter", async () => {
    const tasks = new TaskStore(watched.db);
    await (tasks.collection as unknown as Collection<Doc & { status: string }>).insertOne({ _id: 'task_guarded', status: 'submitted', progress: 0 });
    const from = watched.writes.length;
    await tasks.recordVendorTask('task_guarded', 'v1');
    assert.equal(await tasks.markRunning('task_guarded', { vendorTaskId: 'v1' }), true);
    await tasks.updateProgress('task_guarded', 30);
    await tasks.updateProgress('task_guarded', 30);
    await tasks.updateProgress('task_guarded', 20);
    assert.equal((await tasks.finish('task_guarded', { status: 'failed', error: { code: 'generation_failed', message: 'm' } })).changed, true);
    await tasks.updateProgress('task_guarded', 90);
    const task = await tasks.find('task_guarded');
    assert.equal(task?.status, 'failed');
    assert.equal(task?.progress, 30, 'progress moves up only, and only while the task runs');
    const filters = writeFilters(from).map((filter) => Object.keys(filter).sort().join());
    if (ferretDb) {
      // recordVendorTask, markRunning, one progress write (the others' guards failed on the read), finish.
      assert.deepEqual(filters, ['_id', '_id,status', '_id', '_id,status']);
    } else {
      assert.deepEqual(filters, ['_id,status', '_id,status', '_id,progress,status', '_id,progress,status', '_id,progress,status', '_id,status', '_id,progress,status']);
    }
  });
});
