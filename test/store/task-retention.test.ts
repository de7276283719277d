import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { VideoTaskWorkflowInput, WebhookAttempt } from '../../core/video-task.ts';
import { TaskRetention } from '../../store/task-retention.ts';
import { TASK_DECISIONS, TASK_WORKFLOW_STARTS, TaskStore, type TaskDocument } from '../../store/tasks.ts';
import { testDatabase } from '../helpers/engines.ts';

// Which tasks a retention deletes: only those nothing writes any more (final, last written
// before the cut, no webhook still tried, none tried since the cut), each with its start and
// decision records; the rest stay whole.

describe('tasks past their retention', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let tasks: TaskStore;
  let retention: TaskRetention;
  before(async () => {
    database = await testDatabase('task-retention');
    tasks = new TaskStore(database.db);
    retention = new TaskRetention(database.db);
  });
  after(() => database.drop());

  const DAY = 86_400_000;
  const cut = new Date(Date.now() - 2 * DAY);
  const longAgo = new Date(cut.getTime() - 5 * DAY);
  const attempt = (at: Date, outcome: WebhookAttempt['outcome']): WebhookAttempt => ({ attempt: 1, at, outcome, duration_ms: 3 });

  async function stored(id: string, fields: Partial<TaskDocument>): Promise<void> {
    await tasks.insert({
      _id: id, account_id: 'acct_retention', key_id: 'key_retention', model: 'seedance-2.0', status: 'succeeded', seconds: 5, resolution: '720p', ratio: '16:9',
      metadata: {}, price_micros: 1, progress: 100, request_id: 'req_retention', workflow_started: false, workflow_input: {} as VideoTaskWorkflowInput,
      created_at: longAgo, updated_at: longAgo, ...fields,
    });
    await tasks.markWorkflowStarted(id);
    await tasks.decide(id, 'run');
  }

  const records = async (collection: string, ids: string[]) =>
    (await database.db.collection<{ _id: string }>(collection).find({ _id: { $in: ids } }).toArray()).map((record) => record._id).sort();

  it('deletes settled tasks with their records, and keeps open, recent and still-called-back ones whole', async () => {
    await stored('task_ret_succeeded', {});
    await stored('task_ret_failed', { status: 'failed', error: { code: 'vendor_failed', message: 'no' } });
    await stored('task_ret_delivered', { webhook: { url: 'https://hooks.example/a', state: 'delivered', attempts: [attempt(longAgo, 'delivered')] } });
    await stored('task_ret_exhausted', { status: 'failed', webhook: { url: 'https://hooks.example/a', state: 'exhausted', attempts: [attempt(longAgo, 'retry'), attempt(longAgo, 'retry')] } });
    await stored('task_ret_gone', { webhook: { url: 'https://hooks.example/a', state: 'gone', attempts: [attempt(longAgo, 'gone')] } });
    await stored('task_ret_refused', { webhook: { url: 'https://hooks.example/a', state: 'refused', attempts: [attempt(longAgo, 'refused')] } });
    await stored('task_ret_stopped', { webhook: { url: 'https://hooks.example/a', state: 'stopped', attempts: [] } });
    await stored('task_ret_running', { status: 'running', progress: 40 });
    await stored('task_ret_submitted', { status: 'submitted', progress: 0 });
    await stored('task_ret_recent', { updated_at: new Date(cut.getTime() + 60_000) });
    await stored('task_ret_pending', { webhook: { url: 'https://hooks.example/a', state: 'pending', attempts: [attempt(longAgo, 'retry')] } });
    // Finished long ago, its webhook given up only after the cut (retries run for days).
    await stored('task_ret_late_hook', { webhook: { url: 'https://hooks.example/a', state: 'exhausted', attempts: [attempt(longAgo, 'retry'), attempt(new Date(cut.getTime() + 1_000), 'retry')] } });
    // The cut is exclusive: a write or an attempt at that very moment keeps the task.
    await stored('task_ret_hook_at_cut', { webhook: { url: 'https://hooks.example/a', state: 'delivered', attempts: [attempt(cut, 'delivered')] } });
    await stored('task_ret_at_cut', { updated_at: cut });

    const gone = ['task_ret_delivered', 'task_ret_exhausted', 'task_ret_failed', 'task_ret_gone', 'task_ret_refused', 'task_ret_stopped', 'task_ret_succeeded'];
    const kept = ['task_ret_at_cut', 'task_ret_hook_at_cut', 'task_ret_late_hook', 'task_ret_pending', 'task_ret_recent', 'task_ret_running', 'task_ret_submitted'];
    assert.deepEqual(await retention.pruneSettled(cut, 100), { deleted: gone.length, more: false });
    const left = (await tasks.collection.find({ account_id: 'acct_retention' }, { projection: { _id: 1 } }).toArray()).map((task) => task._id).sort();
    assert.deepEqual(left, kept);
    for (const collection of [TASK_WORKFLOW_STARTS, TASK_DECISIONS]) {
      assert.deepEqual(await records(collection, gone), [], collection);
      assert.deepEqual(await records(collection, kept), kept, collection);
    }
    // The kept ones are untouched, and a second round finds nothing.
    assert.equal((await tasks.find('task_ret_running'))?.progress, 40);
    assert.deepEqual(await retention.pruneSettled(cut, 100), { deleted: 0, more: false });
  });

  it('works in batches: a full one says more may be left', async () => {
    for (const id of ['task_batch_a', 'task_batch_b', 'task_batch_c']) await stored(id, { account_id: 'acct_batches' });
    const left = async () => tasks.collection.countDocuments({ account_id: 'acct_batches' });
    assert.deepEqual(await retention.pruneSettled(cut, 2), { deleted: 2, more: true });
    assert.equal(await left(), 1);
    assert.deepEqual(await retention.pruneSettled(cut, 2), { deleted: 1, more: false });
    assert.equal(await left(), 0);
  });
});
