import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { request } from 'undici';
import { VendorTransientError } from '../../vendors/types.ts';
import { Ledger } from '../../store/ledger.ts';
import { SweeperCursorStore } from '../../store/sweeper-cursors.ts';
import { TaskStore } from '../../store/tasks.ts';
import { sweepTerminatedRuns } from '../../worker/terminated-runs.ts';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { signal } from '../helpers/signal.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';

// An operator who terminates a task's workflow (the Web UI's Terminate, `temporal workflow
// terminate`) runs none of its code: unlike a cancel, nothing settled the task, which stayed
// `running` with its price held for good, and its webhook never went out. The sweeper starts
// closeTerminatedTaskWorkflow for such a task.

describe('a task whose workflow an operator terminated', () => {
  let stack: VideoStack;
  let tasks: TaskStore;
  let sweep: () => Promise<number>;
  before(async () => {
    stack = await startVideoStack('terminated-run');
    tasks = new TaskStore(stack.database.db);
    // A webhook attempt under way when a run was terminated settles in a minute; none is here.
    const options = { tasks, cursors: new SweeperCursorStore(stack.database.db), client: stack.temporal.client, taskQueue: stack.taskQueue, webhookSettlesMs: 0 };
    sweep = () => sweepTerminatedRuns(options);
  });
  after(() => stack.close());

  /** A task the vendor is working on (for a minute), its workflow then terminated. */
  async function terminatedTask(name: string, callbackUrl?: string) {
    const account = await createAccount(stack.app, { name, balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const metadata = { resolution: '480p', ...(callbackUrl ? { callback_url: callbackUrl } : {}) };
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: `stopped by hand ${name} [sim:delay=60]`, seconds: '4', metadata });
    assert.equal(submitted.status, 200);
    const taskId = submitted.json.task_id as string;
    for (const started = Date.now(); !(await tasks.find(taskId))?.vendor_task_id; await pause(50)) assert.ok(Date.now() - started < 10_000, 'the vendor never got the task');
    // The submission writes the vendor's id on the task just before it returns: terminated in
    // between, the run's history shows a submission under way, which the sweeper leaves for 70 s
    // (the harder cases below). Here the run is stopped once the submission is on record.
    for (const started = Date.now(); !(await submissionCompleted(taskId)); await pause(50)) assert.ok(Date.now() - started < 10_000, 'the submission never completed');
    await stack.temporal.client.workflow.getHandle(taskId).terminate('an operator stops it');
    return { account, client, taskId, vendorTaskId: (await tasks.find(taskId))!.vendor_task_id! };
  }

  /** Whether the run's history records the vendor submission's completion. */
  async function submissionCompleted(taskId: string): Promise<boolean> {
    const events = (await stack.temporal.client.workflow.getHandle(taskId).fetchHistory()).events ?? [];
    const scheduled = events.find((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'submitToVendor');
    return scheduled !== undefined && events.some((event) => String(event.activityTaskCompletedEventAttributes?.scheduledEventId ?? '') === String(scheduled.eventId));
  }

  /** Sweeps until a closing run starts (Temporal lists a closed run after a short delay). */
  async function sweepUntilClosing(): Promise<void> {
    for (const started = Date.now(); (await sweep()) === 0; await pause(200)) assert.ok(Date.now() - started < 15_000, 'the sweeper never found the terminated run');
  }

  const vendorStatus = async (vendorTaskId: string) =>
    ((await (await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${vendorTaskId}`, { headers: { authorization: 'Bearer sim' } })).body.json()) as { status: string }).status;
  const money = async (accountId: string) => {
    const account = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${accountId}`, headers: adminHeaders })).json();
    return [account.held_usd, account.spent_usd, account.balance_usd];
  };

  it('is closed as a cancel would: vendor task cancelled, hold released, task failed as cancelled, webhook sent', async () => {
    const receiver = await startWebhookReceiver([200]);
    try {
      const { account, client, taskId, vendorTaskId } = await terminatedTask('plain', receiver.url);
      await sweepUntilClosing();
      const task = await client.waitForFinal(taskId, 20_000);
      assert.deepEqual([task.status, task.error?.code], ['failed', 'cancelled']);
      assert.match(task.error!.message, /terminated/);
      assert.deepEqual(await money(account.id), [0, 0, 5]);
      assert.equal(await vendorStatus(vendorTaskId), 'cancelled');
      const [webhook] = await receiver.waitFor(1);
      assert.equal(JSON.parse(webhook!.body).error.code, 'cancelled');
      // Closed: later rounds start nothing for it.
      assert.equal(await sweep(), 0);
      // The closing run's webhook takes its turn among the account's, as the task's own would.
      assert.equal((await stack.temporal.client.workflow.getHandle(taskId).describe()).priority?.fairnessKey, account.id);
      await recordHistoryIfAsked(taskId, 'close-terminated-task');
    } finally {
      await receiver.close();
    }
  });

  it('marks stopped the webhook of a finished task whose run was terminated in its retries, and leaves the task as it ended', async () => {
    // Not before 10 minutes, says the receiver: the terminate comes well before the second attempt.
    const receiver = await startWebhookReceiver([{ status: 503, headers: { 'retry-after': '600' } }]);
    try {
      const account = await createAccount(stack.app, { name: 'stopped retries', balance_usd: 5 });
      const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'finished, then stopped [sim:delay=0]', seconds: '4', metadata: { resolution: '480p', callback_url: receiver.url } });
      const taskId = submitted.json.task_id as string;
      assert.equal((await client.waitForFinal(taskId, 20_000)).status, 'succeeded');
      // Its first attempt failed and is on record.
      for (const started = Date.now(); (await tasks.find(taskId))?.webhook?.attempts.length !== 1; await pause(50)) assert.ok(Date.now() - started < 10_000, 'the first attempt was never recorded');
      await stack.temporal.client.workflow.getHandle(taskId).terminate('an operator stops the retries');
      for (const started = Date.now(); (await tasks.find(taskId))?.webhook?.state === 'pending'; await pause(200)) {
        assert.ok(Date.now() - started < 15_000, 'the sweeper never marked the webhook');
        assert.equal(await sweep(), 0, 'no closing run for a finished task');
      }
      const stored = await tasks.find(taskId);
      assert.deepEqual([stored?.status, stored?.webhook?.state, stored?.webhook?.attempts.length], ['succeeded', 'stopped', 1]);
      const [held, spent] = await money(account.id);
      assert.deepEqual([held, spent], [0, stored!.price_micros / 1_000_000]);
      assert.equal(receiver.received.length, 1);
    } finally {
      await receiver.close();
    }
  });

  it('cancels the vendor task the terminated run started before the task recorded it (read from the run\'s history)', async () => {
    const { client, taskId, vendorTaskId } = await terminatedTask('unrecorded');
    await tasks.collection.updateOne({ _id: taskId }, { $unset: { vendor_task_id: '' } });
    await sweepUntilClosing();
    assert.equal((await client.waitForFinal(taskId, 20_000)).error?.code, 'cancelled');
    assert.equal(await vendorStatus(vendorTaskId), 'cancelled');
  });

  it('records as succeeded a task whose terminated run had already captured its price', async () => {
    const { account, client, taskId } = await terminatedTask('captured');
    // As if the run was stopped between settling the money and recording the task.
    const { workflow_input: input } = (await tasks.find(taskId))!;
    assert.equal(await new Ledger(stack.database.db).apply({ accountId: input.accountId, keyId: input.keyId, reference: taskId, operation: 'capture', amountMicros: input.holdMicros }), 'applied');
    await sweepUntilClosing();
    const task = await client.waitForFinal(taskId, 20_000);
    assert.equal(task.status, 'succeeded');
    await recordHistoryIfAsked(taskId, 'close-terminated-task-paid');
    const [held, spent] = await money(account.id);
    assert.deepEqual([held, spent], [0, input.holdMicros / 1_000_000]);
    // The run was stopped before its usage record too: the key's usage shows the task's spend.
    const usage = await stack.database.db.collection('usage').findOne({ _id: `${taskId}:usage` } as never);
    assert.deepEqual([usage?.key_id, usage?.spend_micros, usage?.video_seconds], [input.keyId, input.holdMicros, 4]);
  });
});

describe('closing terminated tasks, the harder cases', () => {
  let stack: VideoStack;
  let tasks: TaskStore;
  const lines: string[] = [];
  let sweep: (submissionSettlesMs?: number) => Promise<number>;
  before(async () => {
    stack = await startVideoStack('terminated-run-hard', { withWorker: false });
    tasks = new TaskStore(stack.database.db);
    const cursors = new SweeperCursorStore(stack.database.db);
    sweep = (submissionSettlesMs) =>
      sweepTerminatedRuns({ tasks, cursors, client: stack.temporal.client, taskQueue: stack.taskQueue, log: (line) => lines.push(line), ...(submissionSettlesMs === undefined ? {} : { submissionSettlesMs }) });
  });
  after(() => stack.close());

  async function sweepUntil(started: number, submissionSettlesMs?: number): Promise<void> {
    for (const begun = Date.now(); (await sweep(submissionSettlesMs)) < started; await pause(200)) assert.ok(Date.now() - begun < 15_000, 'the sweep never started a closing run');
  }

  it('closes a task whose closing run was itself terminated, and never twice after one completed', async () => {
    const account = await createAccount(stack.app, { name: 'twice', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    // No worker yet: the runs wait, so they can be terminated in any state.
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'never run [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } });
    const taskId = submitted.json.task_id as string;
    await stack.temporal.client.workflow.getHandle(taskId).terminate('an operator stops it');
    await sweepUntil(1);
    await stack.temporal.client.workflow.getHandle(taskId).terminate('and its closing run too');
    await sweepUntil(1);
    const worker = await startStackWorker(stack);
    try {
      const task = await client.waitForFinal(taskId, 20_000);
      assert.deepEqual([task.status, task.error?.code], ['failed', 'cancelled']);
      const money = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      assert.deepEqual([money.held_usd, money.spent_usd, money.balance_usd], [0, 0, 5]);
      // As another worker's sweep would see it, having read the task a moment before it closed:
      // the completed closing run is not followed by another.
      await tasks.collection.updateOne({ _id: taskId }, { $set: { status: 'running' } });
      assert.equal(await sweep(), 0);
    } finally {
      await worker.stop();
    }
  });

  it('waits for a vendor submission its terminated run left under way, then cancels the vendor job it made', async () => {
    const account = await createAccount(stack.app, { name: 'in flight', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const submissionBegun = signal();
    const answered = signal();
    const worker = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async start(request, taskId) {
          submissionBegun.fire();
          await answered.reached;
          return vendor.start(request, taskId);
        },
      }),
    });
    try {
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'terminated mid-submission [sim:delay=60]', seconds: '4', metadata: { resolution: '480p' } });
      const taskId = submitted.json.task_id as string;
      await submissionBegun.reached;
      await stack.temporal.client.workflow.getHandle(taskId).terminate('an operator stops it');
      // Listed, but its submission may still answer: left for a later round.
      for (const begun = Date.now(); !lines.some((line) => line.includes(taskId) && line.includes('waits for the vendor submission')); await pause(200)) {
        assert.ok(Date.now() - begun < 15_000, 'the sweep never saw the terminated run');
        assert.equal(await sweep(60_000), 0);
      }
      // The vendor answers after the Terminate; the activity records the job on the task.
      answered.fire();
      for (const begun = Date.now(); !(await tasks.find(taskId))?.vendor_task_id; await pause(50)) assert.ok(Date.now() - begun < 10_000, 'the vendor job was never recorded');
      const vendorTaskId = (await tasks.find(taskId))!.vendor_task_id!;
      await sweepUntil(1, 0);
      assert.equal((await client.waitForFinal(taskId, 20_000)).error?.code, 'cancelled');
      const vendorTask = await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${vendorTaskId}`, { headers: { authorization: 'Bearer sim' } });
      assert.equal(((await vendorTask.body.json()) as { status: string }).status, 'cancelled');
    } finally {
      // A submission still waiting would hold the worker's shutdown for good.
      answered.fire();
      await worker.stop();
    }
  });
  it("reads the vendor again, over minutes, for the clip of a paid task whose first read failed: its link is the vendor's, not a /content with nothing behind it", async () => {
    // Seedance has no clip for the gateway to stream (no openContent): recorded without the
    // vendor's link, a task it was paid for pointed at a /content that answers 404.
    let failingReads = 0;
    const worker = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async status(vendorTaskId) {
          if (failingReads > 0) {
            failingReads--;
            throw new VendorTransientError('seedance answered 503 (simulated)', 503);
          }
          return vendor.status(vendorTaskId);
        },
      }),
    });
    try {
      const account = await createAccount(stack.app, { name: 'paid-blip', balance_usd: 5 });
      const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'paid, then stopped [sim:delay=2]', seconds: '4', metadata: { resolution: '480p' } });
      const taskId = submitted.json.task_id as string;
      for (const begun = Date.now(); !(await tasks.find(taskId))?.vendor_task_id; await pause(50)) assert.ok(Date.now() - begun < 10_000, 'the vendor never got the task');
      await stack.temporal.client.workflow.getHandle(taskId).terminate('an operator stops it');
      const vendorTaskId = (await tasks.find(taskId))!.vendor_task_id!;
      const vendorState = async () => ((await (await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${vendorTaskId}`, { headers: { authorization: 'Bearer sim' } })).body.json()) as { status: string }).status;
      for (const begun = Date.now(); (await vendorState()) !== 'succeeded'; await pause(200)) assert.ok(Date.now() - begun < 10_000, 'the vendor never finished the clip');
      // As if the run was stopped between capturing the price and recording the task.
      const { workflow_input: input } = (await tasks.find(taskId))!;
      assert.equal(await new Ledger(stack.database.db).apply({ accountId: input.accountId, keyId: input.keyId, reference: taskId, operation: 'capture', amountMicros: input.holdMicros }), 'applied');
      // The closing run's first read fails in all three of its tries.
      failingReads = 3;
      await sweepUntil(1);
      const task = await client.waitForFinal(taskId, 30_000);
      await recordHistoryIfAsked(taskId, 'close-terminated-task-paid-reread');
      assert.equal(failingReads, 0, 'the first read failed');
      assert.equal(task.status, 'succeeded');
      assert.match(task.url ?? '', new RegExp(`^${stack.simulatorUrl}/`), `the vendor's link, not the gateway's: ${task.url}`);
    } finally {
      await worker.stop();
    }
  });
});
