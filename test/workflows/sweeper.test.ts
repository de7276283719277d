import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newId } from '../../core/ids.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { KeyCreationStore } from '../../store/key-creations.ts';
import { RateLimitBlockStore } from '../../store/rate-limit-blocks.ts';
import { SweeperCursorStore } from '../../store/sweeper-cursors.ts';
import { sweepOnce, sweepUnstartedTasks } from '../../worker/sweeper.ts';
import { startTaskWorkflow } from '../../core/start-task-workflow.ts';
import { closeAbandonedTask } from '../../store/abandoned-tasks.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// An api that dies after storing a task but before starting its workflow leaves a `submitted`
// task nothing would move, and a caller who got no answer it can act on (a dropped connection,
// or an error whose close of the task died with the process). It is closed unbilled, with or
// without an Idempotency-Key; a workflow that did start is only recorded.

describe('sweeper for tasks an api crash left unstarted', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('sweeper');
  });
  after(() => stack.close());

  const tasks = () => new TaskStore(stack.database.db);
  const ledger = () => new Ledger(stack.database.db);

  /** A task an api stored 5 minutes ago and never started, for an account with $1. One that is
   * `recoverable` (submitted under an Idempotency-Key) has that key's record naming it, unless
   * `keyRecord` is false (the attempt was refused, which released it). */
  async function strandedTask(name: string, recoverable: boolean, deadlineSeconds = 600, callbackUrl?: string, keyRecord = recoverable) {
    const account = await new AccountStore(stack.database.db).create({ name, balanceMicros: 1_000_000 });
    const taskId = newId('task');
    const input: VideoTaskWorkflowInput = {
      taskId, accountId: account._id, keyId: 'key_stranded', modelId: 'seedance-2.0', upstream: 'simulator-seedance',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: 'stranded [sim:delay=0]', seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros: 160_000, deadlineSeconds, requestId: 'req_stranded', ...(callbackUrl ? { callbackUrl } : {}),
    };
    const createdLongAgo = new Date(Date.now() - 5 * 60_000);
    await tasks().insert({
      _id: taskId, account_id: account._id, key_id: 'key_stranded', model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: {}, price_micros: 160_000, progress: 0, request_id: 'req_stranded', workflow_started: false, workflow_input: input, recoverable,
      created_at: createdLongAgo, updated_at: createdLongAgo, ...(callbackUrl ? { webhook: { url: callbackUrl, state: 'pending' as const, attempts: [] } } : {}),
    });
    if (keyRecord) {
      const expiresAt = new Date(createdLongAgo.getTime() + 24 * 3_600_000);
      await new IdempotencyStore(stack.database.db).collection.insertOne({ _id: `key_stranded:${taskId}`, fingerprint: 'stranded', state: 'in_flight', task_id: taskId, created_at: createdLongAgo, refreshed_at: createdLongAgo, expires_at: expiresAt });
    }
    return { account, taskId, input };
  }

  const sweep = () => sweepUnstartedTasks({ tasks: tasks(), ledger: ledger(), client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 60_000 });

  it('closes unbilled a keyed task its key no longer leads to: the attempt was answered an error, and a retry went on under another id', async () => {
    const { account, taskId, input } = await strandedTask('refused-keyed', true, 600, 'https://hooks.example/framegate', false);
    // The refused attempt's hold landed; its api was killed before the close in the background.
    assert.equal(await ledger().apply({ accountId: account._id, keyId: 'key_stranded', reference: taskId, operation: 'hold', amountMicros: input.holdMicros }), 'applied');
    assert.equal(await sweep(), 1);
    const task = await tasks().find(taskId);
    assert.deepEqual([task?.status, task?.error?.code, task?.webhook?.state], ['failed', 'gateway_unavailable', 'stopped']);
    await assert.rejects(stack.temporal.client.workflow.getHandle(taskId).describe(), /not found/i);
    const totals = await ledger().totals(account._id);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  for (const cut of ['release', 'finish'] as const) {
    it(`finishes a close unstarted cut short at its ${cut}: the task still reads submitted, and the next sweep closes it with its money back`, async () => {
      const { account, taskId, input } = await strandedTask(`cut-at-${cut}`, false);
      assert.equal(await ledger().apply({ accountId: account._id, keyId: 'key_stranded', reference: taskId, operation: 'hold', amountMicros: input.holdMicros }), 'applied');
      // The first close loses the store at that step (a kill, or the store closing under an api
      // at a shutdown).
      class LedgerLostAtTheRelease extends Ledger {
        override async apply(...args: Parameters<Ledger['apply']>) {
          if (args[0].operation === 'release') throw new Error('store closed before the release');
          return super.apply(...args);
        }
      }
      class TasksLostAtTheFinish extends TaskStore {
        override async finish(): ReturnType<TaskStore['finish']> {
          throw new Error('store closed before the task was written failed');
        }
      }
      const stores = cut === 'release' ? { tasks: tasks(), ledger: new LedgerLostAtTheRelease(stack.database.db) } : { tasks: new TasksLostAtTheFinish(stack.database.db), ledger: ledger() };
      await assert.rejects(closeAbandonedTask(stores, input, 'The task could not be stored.'), /store closed/);
      // Written failed only after the money went back: a task failed with its hold still held
      // was never looked at again (the sweeper reads submitted tasks).
      assert.equal((await tasks().find(taskId))?.status, 'submitted');
      assert.equal(await sweep(), 1);
      assert.deepEqual([(await tasks().find(taskId))?.status, await tasks().workflowStarted(taskId)], ['failed', true]);
      const totals = await ledger().totals(account._id);
      assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
      assert.equal(await sweep(), 0);
    });
  }

  it('closes unbilled a stranded keyed task even while its key\'s record names it: its caller may have been answered an error the process died before settling', async () => {
    const { account, taskId } = await strandedTask('stranded', true, 600, 'https://hooks.example/framegate');
    assert.equal(await stack.database.db.collection('idempotency_keys').countDocuments({ task_id: taskId }), 1);
    assert.equal(await sweep(), 1);
    const task = await tasks().find(taskId);
    assert.deepEqual([task?.status, task?.error?.code, task?.webhook?.state], ['failed', 'gateway_unavailable', 'stopped']);
    await assert.rejects(stack.temporal.client.workflow.getHandle(taskId).describe(), /not found/i);
    assert.equal(await sweep(), 0, 'a second sweep finds nothing');
    const totals = await ledger().totals(account._id);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  it('records a stranded task whose workflow the api did start (it died before recording the start), and leaves its run alone', async () => {
    const { account, taskId, input } = await strandedTask('started-unrecorded', true);
    await startTaskWorkflow(stack.temporal.client, stack.taskQueue, input);
    assert.equal(await sweep(), 1);
    assert.equal(await tasks().workflowStarted(taskId), true);
    assert.equal(await sweep(), 0, 'a second sweep finds nothing');
    assert.equal((await stack.temporal.client.workflow.getHandle(taskId).result()).status, 'succeeded');
    const totals = await ledger().totals(account._id);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [840_000, 0, 160_000]);
  });

  it('counts a started task\'s deadline from its submission, not from the sweep', async () => {
    // Submitted 5 minutes ago with a 2-minute deadline: the caller was promised an answer by
    // then, so the task fails unbilled instead of running a vendor job the caller gave up on.
    const { account, taskId, input } = await strandedTask('stranded past its deadline', true, 120);
    // Started late, as the sweeper started such tasks before it closed them all unstarted.
    await startTaskWorkflow(stack.temporal.client, stack.taskQueue, { ...input, submittedAt: (await tasks().find(taskId))!.created_at.getTime() });

    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'deadline_exceeded');
    assert.match(result.error!.message, /could not be started within its deadline of 120 seconds/);
    const totals = await ledger().totals(account._id);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
    await recordHistoryIfAsked(taskId, 'video-task-sweeper-past-deadline');
  });

  it('closes unbilled a stranded task whose caller never got its id, hold released and no workflow started', async () => {
    const { account, taskId, input } = await strandedTask('unanswered', false, 600, 'https://hooks.example/framegate');
    // The api placed the hold, then died before starting the workflow and answering.
    assert.equal(await ledger().apply({ accountId: account._id, keyId: 'key_stranded', reference: taskId, operation: 'hold', amountMicros: input.holdMicros }), 'applied');
    assert.equal(await sweepUnstartedTasks({ tasks: tasks(), ledger: ledger(), client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 60_000 }), 1);
    const task = await tasks().find(taskId);
    assert.deepEqual([task?.status, task?.error?.code], ['failed', 'gateway_unavailable']);
    // Its webhook is never sent (nobody knows the task): it no longer reads as pending.
    assert.equal(task?.webhook?.state, 'stopped');
    assert.equal(await tasks().workflowStarted(taskId), true, 'the sweeper leaves it alone from now on');
    await assert.rejects(stack.temporal.client.workflow.getHandle(taskId).describe(), /not found/i);
    const totals = await ledger().totals(account._id);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  it('leaves a fresh task alone during its grace period', async () => {
    const ledger = new Ledger(stack.database.db);
    const tasks = new TaskStore(stack.database.db);
    const taskId = newId('task');
    const now = new Date();
    await tasks.insert({
      _id: taskId, account_id: 'acct_fresh', key_id: 'key_fresh', model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: {}, price_micros: 1, progress: 0, request_id: 'req_fresh', workflow_started: false, workflow_input: {} as VideoTaskWorkflowInput,
      created_at: now, updated_at: now,
    });
    assert.equal(await sweepUnstartedTasks({ tasks, ledger, client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 60_000 }), 0);
    assert.equal(await tasks.workflowStarted(taskId), false);
  });
  // These two leave a task the sweeper cannot start behind them: they come last.
  it('moves the other stranded tasks when one of them cannot be moved', async () => {
    const broken = await strandedTask('broken', true);
    const good = await strandedTask('good', true);
    // Temporal refuses to say whether the broken one's workflow exists (and only its).
    const real = stack.temporal.client;
    const client = {
      workflow: {
        start: real.workflow.start.bind(real.workflow),
        getHandle: (workflowId: string) => (workflowId === broken.taskId ? { describe: async () => Promise.reject(new Error('refused (simulated)')) } : real.workflow.getHandle(workflowId)),
      },
    } as unknown as Client;
    const lines: string[] = [];
    assert.equal(await sweepUnstartedTasks({ tasks: tasks(), ledger: ledger(), client, taskQueue: stack.taskQueue, graceMs: 60_000, log: (line) => lines.push(line) }), 2);
    assert.deepEqual([(await tasks().find(good.taskId))?.status, await tasks().workflowStarted(good.taskId)], ['failed', true], 'the good task closed whatever the order');
    assert.deepEqual([(await tasks().find(broken.taskId))?.status, await tasks().workflowStarted(broken.taskId)], ['submitted', false], 'the broken one waits for the next sweep');
    assert.ok(lines.some((line) => line.includes(broken.taskId) && line.includes('next sweep')), lines.join('\n'));
  });

  it('clears expired records (and scrubs key plaintexts past their time) first, and stops at the first unstarted task when Temporal cannot be reached', async () => {
    const { db } = stack.database;
    const stranded = await strandedTask('unreachable', true);
    const another = await strandedTask('unreachable too', true);
    const idempotency = new IdempotencyStore(db);
    const past = new Date(Date.now() - 25 * 3_600_000);
    await idempotency.claim({ id: 'sweeper-expired-key', fingerprint: 'f', taskId: 'task_x', now: past });
    const blocks = new RateLimitBlockStore(db);
    await blocks.collection.insertOne({ _id: 'requests:key_sweeper:1:100:0', expires_at: past });
    const keyCreations = new KeyCreationStore(db);
    const sealed = { account_id: 'acct_sweeper', key_id: 'key_sweeper', name: 'k', models: null, sealed_plaintext: 'sealed', created_at: past };
    await keyCreations.collection.insertMany([
      { ...sealed, _id: 'keycr_sweeper_past', sealed_until: new Date(past.getTime() + 3_600_000) },
      { ...sealed, _id: 'keycr_sweeper_kept', sealed_until: new Date(Date.now() + 3_600_000) },
    ]);
    // Nothing listens on port 1: every Temporal call fails (at once: the client's own retries,
    // about 20 s of them, would only slow the suite down).
    const unreachable = new Client({
      connection: Connection.lazy({ address: '127.0.0.1:1', interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: 1 }))] }),
    });
    const lines: string[] = [];
    const failed = await sweepOnce({
      tasks: tasks(), ledger: ledger(), client: unreachable, taskQueue: stack.taskQueue, graceMs: 60_000, log: (line) => lines.push(line),
      leases: new BudgetLeaseStore(db), rateLimitBlocks: blocks, idempotency, keyCreations, cursors: new SweeperCursorStore(db),
    });
    await unreachable.connection.close();
    // A task it could not start fails only that task; listing terminated runs needs Temporal.
    assert.deepEqual(failed, ['terminated runs']);
    // Temporal out of reach: the round stops at the first task rather than wait on each. The
    // first is the oldest: the one the test before left behind, when it ran first.
    const candidates = await tasks().findUnstarted(new Date(Date.now() - 60_000), 100);
    assert.ok(candidates.length >= 2, 'at least these two were waiting');
    const left = lines.filter((line) => line.includes('left for the next sweep'));
    assert.deepEqual(left.map((line) => line.split(' ')[2]), [candidates[0]?._id], lines.join('\n'));
    assert.deepEqual([(await tasks().find(stranded.taskId))?.status, (await tasks().find(another.taskId))?.status], ['submitted', 'submitted']);
    assert.equal(await tasks().workflowStarted(stranded.taskId), false);
    assert.equal(await idempotency.collection.countDocuments({ expires_at: { $lt: new Date() } }), 0, 'expired Idempotency-Key records deleted');
    assert.equal(await blocks.collection.countDocuments({ _id: 'requests:key_sweeper:1:100:0' }), 0, 'past blocks deleted');
    const seals = await keyCreations.collection.find({ account_id: 'acct_sweeper' }).sort({ _id: 1 }).toArray();
    assert.deepEqual(seals.map((record) => [record._id, record.sealed_plaintext]), [['keycr_sweeper_kept', 'sealed'], ['keycr_sweeper_past', null]], 'a key plaintext past its time scrubbed, its record kept');
  });
});
