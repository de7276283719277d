import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { TaskStore, type TaskDocument } from '../../store/tasks.ts';
import { testDatabase } from '../helpers/engines.ts';

describe('task snapshots', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let tasks: TaskStore;
  before(async () => {
    database = await testDatabase('tasks');
    tasks = new TaskStore(database.db);
  });
  after(() => database.drop());

  function task(id: string): TaskDocument {
    const now = new Date();
    return {
      _id: id, account_id: 'acct_a', key_id: 'key_a', model: 'seedance-2.0', status: 'submitted', seconds: 5, resolution: '720p', ratio: '16:9',
      metadata: {}, price_micros: 1, progress: 0, request_id: 'req_a', workflow_started: true, workflow_input: {} as VideoTaskWorkflowInput,
      created_at: now, updated_at: now,
    };
  }

  it('a final state never changes: later finish, running or progress writes are ignored', async () => {
    await tasks.insert(task('task_final'));
    await tasks.markRunning('task_final', { vendorTaskId: 'v1' });
    await tasks.finish('task_final', { status: 'succeeded', url: 'https://cdn.example/clip.mp4' });
    await tasks.finish('task_final', { status: 'failed', error: { code: 'late', message: 'late failure' } });
    await tasks.markRunning('task_final', { vendorTaskId: 'v2' });
    await tasks.updateProgress('task_final', 50);
    const stored = await tasks.find('task_final');
    assert.equal(stored?.status, 'succeeded');
    assert.equal(stored?.url, 'https://cdn.example/clip.mp4');
    assert.equal(stored?.error, undefined);
    assert.equal(stored?.vendor_task_id, 'v1');
    assert.equal(stored?.progress, 100);
  });

  it('recording a started workflow never writes over the states the worker writes meanwhile', async () => {
    // On FerretDB an update is an unisolated read-modify-write: a "started" flag set on the
    // task beside the worker's final write put 9 of 100 succeeded tasks back to running.
    for (let trial = 0; trial < 100; trial++) {
      const id = `task_started_race_${trial}`;
      await tasks.insert({ ...task(id), status: 'running', workflow_started: false });
      await Promise.all([tasks.markWorkflowStarted(id), tasks.finish(id, { status: 'succeeded', url: 'https://cdn.example/clip.mp4' })]);
      assert.equal((await tasks.find(id))?.status, 'succeeded', `trial ${trial}`);
      assert.equal(await tasks.workflowStarted(id), true);
    }
  });

  it('the sweeper is shown only tasks still submitted whose start was never recorded', async () => {
    const longAgo = new Date(Date.now() - 3_600_000);
    const stored = async (id: string, status: TaskDocument['status'], workflowStarted: boolean) =>
      tasks.insert({ ...task(id), account_id: 'acct_sweep', status, workflow_started: workflowStarted, created_at: longAgo });
    await stored('task_sweep_unstarted', 'submitted', false);
    await stored('task_sweep_recorded', 'submitted', false);
    await tasks.markWorkflowStarted('task_sweep_recorded');
    await tasks.markWorkflowStarted('task_sweep_recorded');
    await stored('task_sweep_legacy', 'submitted', true);
    await stored('task_sweep_running', 'running', false);
    const found = (await tasks.findUnstarted(new Date(), 100)).map((found) => found._id).filter((id) => id.startsWith('task_sweep_'));
    assert.deepEqual(found, ['task_sweep_unstarted']);
    assert.equal((await tasks.findUnstarted(new Date(), 100)).find((found) => found._id === 'task_sweep_unstarted')?.workflow_input !== undefined, true);
  });

  it('shows the sweeper the oldest stranded tasks first, whatever the order of their ids or inserts, and only `limit` of them', async () => {
    const base = Date.now() - 7_200_000;
    // Inserted newest first, ids in neither order: the store's own order is none of them.
    const ages: Array<[string, number]> = [['task_order_m', 3], ['task_order_z', 1], ['task_order_a', 4], ['task_order_q', 2]];
    for (const [id, minutesAfter] of ages.toSorted((a, b) => b[1] - a[1])) {
      await tasks.insert({ ...task(id), account_id: 'acct_order', workflow_started: false, created_at: new Date(base + minutesAfter * 60_000) });
    }
    const ordered = (await tasks.findUnstarted(new Date(base + 10 * 60_000), 100)).map((found) => found._id).filter((id) => id.startsWith('task_order_'));
    assert.deepEqual(ordered, ['task_order_z', 'task_order_q', 'task_order_m', 'task_order_a']);
    // Nothing older than these is stranded in this store, so a limit of 2 keeps the first two.
    const firstTwo = (await tasks.findUnstarted(new Date(base + 10 * 60_000), 2)).map((found) => found._id);
    assert.deepEqual(firstTwo, ['task_order_z', 'task_order_q']);
  });

  it('another account cannot read a task', async () => {
    await tasks.insert(task('task_owned'));
    assert.equal((await tasks.findForAccount('task_owned', 'acct_a'))?._id, 'task_owned');
    assert.equal(await tasks.findForAccount('task_owned', 'acct_b'), null);
  });
});
