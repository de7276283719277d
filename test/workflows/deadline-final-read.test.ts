import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createRequire } from 'node:module';
import { setTimeout as pause } from 'node:timers/promises';
import { NativeConnection, Worker } from '@temporalio/worker';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { testTemporalAddress } from '../helpers/engines.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';
import { signal } from '../helpers/signal.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// A worker that goes away after the vendor accepted a task and comes back after the task's
// deadline: the vendor finished the clip meanwhile. The task must end with the clip (and be
// billed), not be cancelled at the vendor and failed as deadline_exceeded: given up without a
// look, the clip was thrown away while the operator still paid the vendor for it. And a task
// whose hold came only after its deadline must not start a vendor task at all.

const DEADLINE_SECONDS = 3;

describe('a task whose deadline passed while its worker was away', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('deadline-final-read', { withWorker: false, deadlineSeconds: DEADLINE_SECONDS });
  });
  after(() => stack.close());

  /** A worker for the stack that notes each task the vendor is asked to start. */
  async function workerCountingVendorStarts() {
    const vendorStarts: string[] = [];
    const worker = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async start(request, taskId) {
          vendorStarts.push(taskId ?? '');
          return vendor.start(request, taskId);
        },
      }),
    });
    return { worker, vendorStarts };
  }

  it('reads the vendor once more at the deadline and keeps the finished clip', async () => {
    const account = await createAccount(stack.app, { name: 'late worker', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const cancelled: string[] = [];
    const vendorAccepted = signal();
    const released = signal();
    // The first worker: its submission returns only once the worker is stopping, so the
    // workflow's next step waits for the second one.
    const first = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async start(request, taskId) {
          const started = await vendor.start(request, taskId);
          vendorAccepted.fire();
          await released.reached;
          return started;
        },
      }),
    });
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'finished while nobody looked [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } });
    assert.equal(submitted.status, 200);
    await vendorAccepted.reached;
    first.worker.shutdown();
    released.fire();
    await first.stop();
    await pause(DEADLINE_SECONDS * 1000 + 500);

    const second = await startStackWorker(stack, {
      vendorOverrides: () => ({
        async cancel(vendorTaskId) {
          cancelled.push(vendorTaskId);
        },
      }),
    });
    try {
      const task = await client.waitForFinal(submitted.json.task_id, 30_000);
      assert.equal(task.status, 'succeeded', JSON.stringify(task.error));
      assert.ok(task.url, JSON.stringify(task));
      assert.deepEqual(cancelled, []);
      const billed = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      assert.equal(billed.held_usd, 0);
      assert.ok(billed.spent_usd > 0, JSON.stringify(billed));
      await recordHistoryIfAsked(submitted.json.task_id, 'video-task-deadline-final-read-kept');
    } finally {
      await second.stop();
    }
  });

  it('starts no vendor task once the deadline has passed before the submission', async () => {
    const account = await createAccount(stack.app, { name: 'late hold', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    // A worker with the workflows and no activities: it runs the task's first step (the
    // deadline is set there, the hold scheduled) and nothing after it.
    const connection = await NativeConnection.connect({ address: testTemporalAddress() });
    const workflowsOnly = await Worker.create({ connection, taskQueue: stack.taskQueue, workflowsPath: createRequire(import.meta.url).resolve('../../workflows/index.ts') });
    const running = workflowsOnly.run();
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'held too late [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } });
    assert.equal(submitted.status, 200);
    const handle = stack.temporal.client.workflow.getHandle(submitted.json.task_id);
    const holdScheduled = async () => ((await handle.fetchHistory()).events ?? []).some((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'holdFunds');
    for (const started = Date.now(); !(await holdScheduled()); await pause(50)) assert.ok(Date.now() - started < 10_000, 'the hold was never scheduled');
    workflowsOnly.shutdown();
    await running;
    await connection.close();
    await pause(DEADLINE_SECONDS * 1000 + 500);

    const { worker, vendorStarts } = await workerCountingVendorStarts();
    try {
      const task = await client.waitForFinal(submitted.json.task_id, 30_000);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'deadline_exceeded');
      assert.match(task.error!.message, /could not be started within its deadline of 3 seconds/);
      assert.deepEqual(vendorStarts, []);
      const billed = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      assert.equal(billed.held_usd, 0);
      assert.equal(billed.spent_usd, 0);
      await recordHistoryIfAsked(submitted.json.task_id, 'video-task-deadline-before-submission');
    } finally {
      await worker.stop();
    }
  });

  it('counts the deadline from the submission, not from when a worker first ran the task', async () => {
    const account = await createAccount(stack.app, { name: 'no worker', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'queued through an outage [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } });
    assert.equal(submitted.status, 200);
    // No worker at all until the deadline has passed: the task must not get a fresh 3 seconds.
    await pause(DEADLINE_SECONDS * 1000 + 500);
    const { worker, vendorStarts } = await workerCountingVendorStarts();
    try {
      const task = await client.waitForFinal(submitted.json.task_id, 30_000);
      assert.equal(task.error?.code, 'deadline_exceeded', JSON.stringify(task));
      assert.deepEqual(vendorStarts, [], 'no vendor task for a task already past its deadline');
      await recordHistoryIfAsked(submitted.json.task_id, 'video-task-deadline-from-start');
    } finally {
      await worker.stop();
    }
  });
});
