import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Collection, Document } from 'mongodb';
import { guardedDelete, guardedUpdate } from '../../store/guarded-writes.ts';
import { TaskStore } from '../../store/tasks.ts';
import { testDatabase } from '../helpers/engines.ts';
import { watchedDatabase, type WatchedDatabase } from '../helpers/watched-database.ts';

// Writes that must happen only while a document still reads as expected: the guard goes into
// the write's filter beside _id, and the store must serve that filter by the _id index. Stock
// FerretDB 1.24 did not (it decoded the whole collection in Go, 0.47 s a write at 10,000 tasks);
// the FerretDB `npm test` and `npm start` build carries a patch that makes it
// (scripts/patches/ferretdb-v1.24.2-indexed-filters.patch).

interface Doc {
  _id: string;
  state?: string;
  created_at?: Date;
  progress?: number;
}

/** How the store plans `filter` on `collection`, flattened to one string. */
async function planOf(collection: Collection<Document>, filter: Document): Promise<string> {
  const explained = await collection.find(filter).explain();
  return JSON.stringify(explained.queryPlanner ?? explained);
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

  it('finds a document by _id through the _id index, with a guard beside _id or without', async () => {
    const collection = shared.db.collection('guarded_plans');
    await collection.insertMany(Array.from({ length: 50 }, (_, index) => ({ _id: `doc_${index}` as unknown as Document['_id'], status: 'running' })));
    const byId = await planOf(collection, { _id: 'doc_7' });
    const guarded = await planOf(collection, { _id: 'doc_7', status: { $in: ['submitted', 'running'] }, 'webhook.state': 'pending' });
    if (ferretDb) {
      // FerretDB's SQLite backend answers with SQLite's own plan: "SCAN <table>" when it reads
      // every row, "SEARCH <table> USING INDEX <table>__id_" when it goes by the _id index.
      for (const plan of [byId, guarded]) {
        assert.match(plan, /SEARCH \S+ USING INDEX \S+__id_ /, plan);
        assert.doesNotMatch(plan, /detail=SCAN /, plan);
      }
    } else {
      for (const plan of [byId, guarded]) {
        assert.match(plan, /IDHACK|EXPRESS_IXSCAN|IXSCAN/, plan);
        assert.doesNotMatch(plan, /COLLSCAN/, plan);
      }
    }
    // A filter on a field without an index still reads every row (so hot lookups go by _id).
    assert.match(await planOf(collection, { status: 'running' }), ferretDb ? /detail=SCAN / : /COLLSCAN/);
  });

  it('writes only while the guard holds, with the guard in the filter, and never once the caller is out of time', async () => {
    const collection = watched.db.collection<Doc>('guarded_docs');
    const claimedAt = new Date(5_000);
    await collection.insertMany([
      { _id: 'kept', state: 'in_flight', created_at: claimedAt },
      { _id: 'taken_over', state: 'in_flight', created_at: new Date(6_000) },
      { _id: 'late', state: 'in_flight', created_at: claimedAt },
    ]);
    const from = watched.writes.length;
    assert.equal(await guardedUpdate(collection, 'kept', { state: 'in_flight', created_at: claimedAt }, { $set: { state: 'completed' } }), true);
    assert.equal(await guardedUpdate(collection, 'kept', { state: 'in_flight', created_at: claimedAt }, { $set: { state: 'again' } }), false, 'the guard no longer holds');
    assert.equal(await guardedDelete(collection, 'taken_over', { state: 'in_flight', created_at: claimedAt }), false, 'another attempt holds it');
    assert.equal(await guardedDelete(collection, 'missing', { state: 'in_flight' }), false);
    assert.equal(await guardedDelete(collection, 'taken_over', { created_at: new Date(6_000) }), true);
    const sentBefore = watched.writes.length;
    assert.equal(await guardedUpdate(collection, 'late', { state: 'in_flight' }, { $set: { state: 'completed' } }, () => false), false);
    assert.equal(await guardedDelete(collection, 'late', { state: 'in_flight' }, () => false), false);
    assert.equal(watched.writes.length, sentBefore, 'a caller out of time sends nothing');
    assert.deepEqual(await collection.find({}).toArray(), [
      { _id: 'kept', state: 'completed', created_at: claimedAt },
      { _id: 'late', state: 'in_flight', created_at: claimedAt },
    ]);
    const filters = writeFilters(from);
    assert.equal(filters.length, 5);
    assert.deepEqual(filters[0], { state: 'in_flight', created_at: claimedAt, _id: 'kept' });
  });

  it("keeps a task's progress moving up only, and only while the task runs, each write guarded in its filter", async () => {
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
    assert.deepEqual(filters, ['_id,status', '_id,status', '_id,progress,status', '_id,progress,status', '_id,progress,status', '_id,status', '_id,progress,status']);
  });
});
