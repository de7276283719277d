import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { newId } from '../../core/ids.ts';
import { startTaskWorkflow } from '../../core/start-task-workflow.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import type { videoTaskWorkflow } from '../../workflows/video-task.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';
import { signal } from '../helpers/signal.ts';
import { VendorTransientError } from '../../vendors/types.ts';
import { setTimeout as pause } from 'node:timers/promises';

// An operator cancelling a task's workflow (Temporal Web UI or CLI): the task ends failed
// (`cancelled`), its hold goes back to the balance whenever the cancel came, and a vendor task
// already under way is cancelled too.

const PRICE = 160_000;

describe('a video task cancelled by an operator', () => {
  let stack: VideoStack;
  let stopWorker: (() => Promise<void>) | undefined;
  let ledger: Ledger;
  let tasks: TaskStore;
  let accounts: AccountStore;

  before(async () => {
    // No worker yet: the first case cancels before any activity of the workflow has run.
    stack = await startVideoStack('operator-cancel', { withWorker: false });
    ledger = new Ledger(stack.database.db);
    tasks = new TaskStore(stack.database.db);
    accounts = new AccountStore(stack.database.db);
  });
  after(async () => {
    await stopWorker?.();
    await stack.close();
  });

  async function startWorker(): Promise<void> {
    ({ stop: stopWorker } = await startStackWorker(stack));
  }

  /** A task stored and held the way the api does it, and its workflow started. */
  async function submitted(prompt: string): Promise<{ accountId: string; taskId: string }> {
    const account = await accounts.create({ name: 'cancelled', balanceMicros: 1_000_000 });
    const taskId = newId('task');
    const input: VideoTaskWorkflowInput = {
      taskId, accountId: account._id, keyId: 'key_cancel', modelId: 'seedance-2.0', upstream: 'simulator-seedance',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt, seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros: PRICE, deadlineSeconds: 600, requestId: 'req_cancel',
    };
    const now = new Date();
    await tasks.insert({
      _id: taskId, account_id: account._id, key_id: 'key_cancel', model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: {}, price_micros: PRICE, progress: 0, request_id: 'req_cancel', workflow_started: false, workflow_input: input, created_at: now, updated_at: now,
    });
    assert.equal(await ledger.apply({ accountId: account._id, keyId: 'key_cancel', reference: taskId, operation: 'hold', amountMicros: PRICE }), 'applied');
    await startTaskWorkflow(stack.temporal.client, stack.taskQueue, input);
    return { accountId: account._id, taskId };
  }

  async function assertCancelledAndReturned(accountId: string, taskId: string): Promise<void> {
    const result = await stack.temporal.client.workflow.getHandle<typeof videoTaskWorkflow>(taskId).result();
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'cancelled');
    assert.equal((await tasks.find(taskId))?.error?.code, 'cancelled');
    const totals = await ledger.totals(accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  }

  it('gives the hold back when the cancel comes before the workflow ran anything', async () => {
    const { accountId, taskId } = await submitted('never run [sim:delay=0]');
    await stack.temporal.client.workflow.getHandle(taskId).cancel();
    await startWorker();
    await assertCancelledAndReturned(accountId, taskId);
    await recordHistoryIfAsked(taskId, 'video-task-cancelled-before-running');
  });

  it('cancels the vendor task too when the cancel comes while the vendor generates', async () => {
    const { accountId, taskId } = await submitted('a long clip [sim:delay=60]');
    await waitUntil(async () => (await tasks.find(taskId))?.status === 'running');
    const vendorTaskId = (await tasks.find(taskId))!.vendor_task_id!;
    // What an operator reads in the Web UI before cancelling: whose task, and where it stands.
    const handle = stack.temporal.client.workflow.getHandle(taskId);
    assert.match((await (await handle.describe()).staticSummary()) ?? '', /^seedance-2\.0, 4 s at 480p, for acct_/);
    await waitUntil(async () => /^Vendor task cgt-\S+: running, \d+ %; next read in \d+ s, deadline at 20/.test((await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata')).currentDetails ?? ''));
    await stack.temporal.client.workflow.getHandle(taskId).cancel();
    await assertCancelledAndReturned(accountId, taskId);
    const vendorTask = await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${vendorTaskId}`, { headers: { authorization: 'Bearer sim-local-key' } });
    assert.equal(((await vendorTask.body.json()) as { status: string }).status, 'cancelled');
    await recordHistoryIfAsked(taskId, 'video-task-cancelled-while-generating');
  });
  it('cancels the vendor task a submission under way made, when the cancel came during the vendor call', async () => {
    // This case needs a worker whose vendor call waits: the shared one makes way for it.
    await stopWorker?.();
    stopWorker = undefined;
    const entered = signal();
    const release = signal();
    const made: string[] = [];
    const cancelledAtVendor: string[] = [];
    const worker = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async start(request, taskId) {
          entered.fire();
          await release.reached;
          const started = await vendor.start(request, taskId);
          made.push(started.vendorTaskId);
          return started;
        },
        async cancel(vendorTaskId) {
          cancelledAtVendor.push(vendorTaskId);
          return vendor.cancel(vendorTaskId);
        },
      }),
    });
    try {
      const { accountId, taskId } = await submitted('made while the cancel came [sim:delay=60]');
      await entered.reached;
      await stack.temporal.client.workflow.getHandle(taskId).cancel();
      // The cancel waits for the call under way, which makes its job once let go.
      await pause(300);
      release.fire();
      await assertCancelledAndReturned(accountId, taskId);
      assert.equal(made.length, 1);
      assert.deepEqual(cancelledAtVendor, made, 'the job the call made is cancelled at the vendor');
      const vendorTask = await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${made[0]}`, { headers: { authorization: 'Bearer sim-local-key' } });
      assert.equal(((await vendorTask.body.json()) as { status: string }).status, 'cancelled');
      await recordHistoryIfAsked(taskId, 'video-task-cancelled-during-submission');
    } finally {
      release.fire();
      await worker.stop();
    }
  });
  it('stops the submission retries at once when the cancel comes while the vendor keeps refusing', async () => {
    await stopWorker?.();
    stopWorker = undefined;
    const starts: number[] = [];
    const worker = await startStackWorker(stack, {
      vendorOverrides: () => ({
        async start() {
          starts.push(Date.now());
          throw new VendorTransientError('vendor busy (503)', 503);
        },
      }),
    });
    try {
      const { accountId, taskId } = await submitted('a vendor that keeps refusing [sim:delay=0]');
      await waitUntil(async () => starts.length >= 2);
      const cancelledAt = Date.now();
      await stack.temporal.client.workflow.getHandle(taskId).cancel();
      await assertCancelledAndReturned(accountId, taskId);
      assert.ok(Date.now() - cancelledAt < 5_000, `ended ${Date.now() - cancelledAt} ms after the cancel`);
      const startsAtCancel = starts.filter((at) => at <= cancelledAt).length;
      await pause(2_500);
      assert.equal(starts.length, startsAtCancel, 'no vendor call after the cancel');
      await recordHistoryIfAsked(taskId, 'video-task-cancelled-during-submission-retries');
    } finally {
      await worker.stop();
    }
  });
});
