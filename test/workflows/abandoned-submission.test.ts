import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MongoNetworkError } from 'mongodb';
import { VideoTaskReads } from '../../api/services/video-task-reads.ts';
import { VideoTaskService } from '../../api/services/video-tasks.ts';
import type { Catalog } from '../../core/catalog.ts';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { startTaskWorkflow } from '../../core/start-task-workflow.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import { sweepUnstartedTasks } from '../../worker/sweeper.ts';
import { ANSWER_GRACE_MS, body, eventually, LOOPBACK, LOOPBACK_NAMES, PRICE, startHalfwaySubmissions, type HalfwaySubmissions } from '../helpers/halfway-submissions.ts';
import type { VideoStack } from '../helpers/video-stack.ts';

// A video submission the store or Temporal fails halfway answers an error, and then nothing of
// it may run or be billed later: not through the sweeper (which closes stored tasks whose
// workflow never started) and not through a workflow whose start did go through after all.
// And a submission whose workflow did start is answered 200 even if the bookkeeping flag after
// it cannot be written. Holds that come late or not at all: hold-queue.test.ts.

/** A ledger whose next hold fails the way a store that just died fails. */
class LedgerLosingTheStoreOnHold extends Ledger {
  failNextHold = true;
  override async apply(input: Parameters<Ledger['apply']>[0]) {
    if (input.operation === 'hold' && this.failNextHold) {
      this.failNextHold = false;
      throw new MongoNetworkError('connection reset by peer (simulated)');
    }
    return super.apply(input);
  }
}

/** The api's task store as seen from a process that dies as it claims its task for the caller:
 * the claim never comes back (and the answer never goes out). */
class TasksDyingOnClaim extends TaskStore {
  override decide(): Promise<never> {
    return new Promise(() => undefined);
  }
}

/** The api's task store when the store fails the claim (and answers again right after). */
class TasksFailingTheClaim extends TaskStore {
  override async decide(taskId: string, wanted: Parameters<TaskStore['decide']>[1]) {
    if (wanted === 'run') throw new MongoNetworkError('connection reset by peer (simulated)');
    return super.decide(taskId, wanted);
  }
}

/** The api's task store when the store fails its first attempt to close a task (and answers
 * again right after). */
class TasksRefusingTheFirstDecision extends TaskStore {
  private refused = false;
  override async decide(taskId: string, wanted: Parameters<TaskStore['decide']>[1]) {
    if (wanted === 'abandon' && !this.refused) {
      this.refused = true;
      throw new MongoNetworkError('connection reset by peer (simulated)');
    }
    return super.decide(taskId, wanted);
  }
}

/** A task store that cannot write the "workflow started" flag. */
class TasksLosingTheStoreOnFlag extends TaskStore {
  override async markWorkflowStarted(): Promise<void> {
    throw new MongoNetworkError('connection reset by peer (simulated)');
  }
}

describe('video submissions that fail halfway', () => {
  let stack: VideoStack;
  let catalog: Catalog;
  let accounts: AccountStore;
  let tasks: TaskStore;
  let ledger: Ledger;
  let service: HalfwaySubmissions['service'];
  let fundedPrincipal: HalfwaySubmissions['fundedPrincipal'];
  before(async () => {
    ({ stack, catalog, accounts, tasks, ledger, service, fundedPrincipal } = await startHalfwaySubmissions('abandoned-submission'));
  });
  after(() => stack.close());

  it('a hold the store drops: the error reaches the caller, the task is closed and the sweeper leaves it alone', async () => {
    const principal = await fundedPrincipal('hold-lost');
    const taskId = newId('task');
    await assert.rejects(service({ ledger: new LedgerLosingTheStoreOnHold(stack.database.db) }).submit(principal, body, 'req_hold_lost', taskId), MongoNetworkError);

    await eventually(async () => {
      const task = await tasks.find(taskId);
      return task?.status === 'failed' && (await tasks.workflowStarted(taskId));
    }, 'the stored task is closed');
    assert.equal((await tasks.find(taskId))?.error?.code, 'gateway_unavailable');
    assert.equal(await sweepUnstartedTasks({ tasks, ledger, client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 0 }), 0, 'nothing for the sweeper');
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);

    // To its caller the submission was refused: the api neither lists the task nor reads it, as
    // it lists and reads the account's accepted one.
    const accepted = await service().submit(principal, body, 'req_hold_kept');
    const reads = new VideoTaskReads(tasks);
    const listed = await reads.list(principal, { limit: 20 });
    assert.deepEqual(listed.tasks.map((task) => task._id), [accepted.task_id]);
    assert.equal((await reads.find(principal, accepted.task_id))._id, accepted.task_id);
    const notFound = (error: unknown) => error instanceof GatewayError && error.code === 'task_not_found';
    await assert.rejects(reads.find(principal, taskId), notFound);
    await assert.rejects(reads.list(principal, { limit: 20, after: taskId }), notFound);
  });

  it('a "started" flag the store drops: the caller still gets its task, which runs and is charged once', async () => {
    const principal = await fundedPrincipal('flag-lost');
    const answer = await service({ tasks: new TasksLosingTheStoreOnFlag(stack.database.db) }).submit(principal, body, 'req_flag_lost');
    assert.equal(answer.status, 'submitted');
    // The sweeper sees a task whose start was never confirmed, finds its workflow and records it.
    await sweepUnstartedTasks({ tasks, ledger, client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 0 });
    const result = await stack.temporal.client.workflow.getHandle(answer.task_id).result();
    assert.equal(result.status, 'succeeded');
    const charges = await ledger.entries.find({ reference: answer.task_id, operation: 'capture' }).toArray();
    assert.equal(charges.length, 1);
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000 - PRICE, 0, PRICE]);
  });

  it('a start that fails for a reason other than an outage keeps its stack trace in the log, and is the 503\'s cause', async () => {
    const principal = await fundedPrincipal('start-bug');
    const bug = new TypeError('a bug in the start (simulated)');
    const lines: Array<{ level: 'warn' | 'error'; fields: Record<string, unknown> }> = [];
    const broken = new VideoTaskService({
      holdDeadlineMs: 2_000, stalledAfterMs: 1_000, catalog, tasks, ledger, accounts,
      temporal: { connection: stack.temporal.client.connection, workflow: { start: async () => { throw bug; } } } as unknown as typeof stack.temporal.client,
      taskQueue: stack.taskQueue, deadlineSeconds: 600, outboundAllowlist: LOOPBACK, hostNames: LOOPBACK_NAMES,
      log: { warn: (fields: Record<string, unknown>) => void lines.push({ level: 'warn', fields }), error: (fields: Record<string, unknown>) => void lines.push({ level: 'error', fields }) } as never,
    });
    await assert.rejects(broken.submit(principal, body, 'req_start_bug', newId('task')), (error: GatewayError) => error.code === 'service_unavailable' && error.cause === bug);
    // An outage is one warning without a trace (test/api/dependency-outage.test.ts); this is no outage.
    assert.deepEqual(lines.map((line) => [line.level, line.fields.err]), [['error', bug]]);
  });

  /** An api whose workflow starts go through, yet are answered as failed once `untilThen` has
   * seen the started workflow (Temporal recording a start as the api's deadline passes). */
  function serviceWithLateStarts(untilThen: (workflowId: string) => Promise<void>, serviceTasks: TaskStore = tasks): VideoTaskService {
    const lateTemporal = {
      connection: stack.temporal.client.connection,
      workflow: {
        start: async (...args: Parameters<typeof stack.temporal.client.workflow.start>) => {
          const handle = await stack.temporal.client.workflow.start(...args);
          await untilThen(handle.workflowId);
          throw new Error('deadline exceeded (simulated)');
        },
      },
    };
    return new VideoTaskService({
      holdDeadlineMs: 2_000, stalledAfterMs: 1_000, catalog, tasks: serviceTasks, ledger, accounts,
      temporal: lateTemporal as unknown as typeof stack.temporal.client, taskQueue: stack.taskQueue, deadlineSeconds: 600, outboundAllowlist: LOOPBACK, hostNames: LOOPBACK_NAMES,
    });
  }

  it('a keyed start that went through as the api gave up on it: the workflow claimed the task first, so the caller gets it, and it runs whole and is charged once', async () => {
    const principal = await fundedPrincipal('started-anyway');
    const decisions = stack.database.db.collection('task_decisions');
    const claimed = (workflowId: string) => eventually(async () => (await decisions.countDocuments({ _id: workflowId } as never)) === 1, 'the workflow claimed its task');
    const taskId = newId('task');
    // Answered 503, the caller would retry under its Idempotency-Key, whose record an error
    // answer lets go, and get a second task (test/api/idempotent-video-start.test.ts).
    assert.deepEqual(await serviceWithLateStarts(claimed).submit(principal, body, 'req_started_anyway', taskId), { task_id: taskId, status: 'submitted' });
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.equal(result.status, 'succeeded', JSON.stringify(result));
    // The abandon found the task claimed: it closed nothing and returned no money.
    assert.equal((await tasks.find(taskId))?.status, 'succeeded');
    assert.deepEqual(await decisions.findOne({ _id: taskId } as never).then((found) => found?.decision), 'run');
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000 - PRICE, 0, PRICE]);
  });

  it('a keyed start answered as failed while the store refuses the close: 503 marked for the key\'s record to stay in flight, and the task still closes unbilled', async () => {
    const principal = await fundedPrincipal('close-refused');
    const refusingOnce = new TasksRefusingTheFirstDecision(stack.database.db);
    const taskId = newId('task');
    // The workflow is left to start (it waits on no claim of ours): the store refuses the api's
    // first "abandon", so whether the task runs is not known when the caller is answered.
    await assert.rejects(serviceWithLateStarts(async () => undefined, refusingOnce).submit(principal, body, 'req_close_refused', taskId), (error: GatewayError) => {
      assert.equal(error.code, 'service_unavailable');
      assert.match(error.message, /Retry under the same Idempotency-Key/);
      return true;
    });
    // Either its workflow or the api's retried close decides it; the money follows that decision.
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    const decided = (await stack.database.db.collection('task_decisions').findOne({ _id: taskId } as never))?.decision;
    await eventually(async () => (await ledger.totals(principal.accountId)).held_micros === 0, 'nothing stays held');
    const totals = await ledger.totals(principal.accountId);
    if (decided === 'run') {
      assert.equal(result.status, 'succeeded', JSON.stringify(result));
      assert.equal(totals.spent_micros, PRICE);
    } else {
      assert.equal(decided, 'abandon');
      assert.deepEqual([totals.balance_micros, totals.spent_micros], [1_000_000, 0]);
    }
  });

  it('a start without a key answered as failed: the workflow waits for a claim the close denies it, so nothing runs and nothing is charged', async () => {
    const principal = await fundedPrincipal('started-unkeyed');
    let taskId = '';
    await assert.rejects(
      serviceWithLateStarts(async (workflowId) => void (taskId = workflowId)).submit(principal, body, 'req_started_unkeyed'),
      (error: GatewayError) => error.code === 'service_unavailable' && /nothing was charged/.test(error.message),
    );
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.equal(result.status, 'failed', JSON.stringify(result));
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  it('an api stalled past the sweeper\'s grace before starting the workflow: the sweeper closed the task, so the caller gets 503, not a failed task, and nothing stays held', async () => {
    const principal = await fundedPrincipal('stalled-api');
    let taskId = '';
    // The api stored the task and placed its hold, then stalled (a long GC, a paused VM) for more
    // than the sweeper's grace before its start call went out: the sweeper ran in between.
    const stalledTemporal = {
      connection: stack.temporal.client.connection,
      workflow: {
        start: async (...args: Parameters<typeof stack.temporal.client.workflow.start>) => {
          taskId = args[1].workflowId;
          assert.equal(await sweepUnstartedTasks({ tasks, ledger, client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 0 }), 1);
          return stack.temporal.client.workflow.start(...args);
        },
      },
    };
    const stalled = new VideoTaskService({
      holdDeadlineMs: 2_000, stalledAfterMs: 1_000, catalog, tasks, ledger, accounts,
      temporal: stalledTemporal as unknown as typeof stack.temporal.client, taskQueue: stack.taskQueue, deadlineSeconds: 600, outboundAllowlist: LOOPBACK, hostNames: LOOPBACK_NAMES,
    });
    // No Idempotency-Key: the sweeper closes such a task rather than starting it.
    await assert.rejects(stalled.submit(principal, { ...body, metadata: { ...body.metadata, callback_url: 'http://127.0.0.1:9/never-called' } }, 'req_stalled'), (error: GatewayError) => error.code === 'service_unavailable' && /nothing was charged/.test(error.message));
    // The workflow the api started anyway finds its task closed: no vendor call, no callback.
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.deepEqual([result.status, result.error?.code, result.webhook], ['failed', 'gateway_unavailable', undefined]);
    assert.equal((await tasks.find(taskId))?.vendor_task_id, undefined);
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  it('goes on with a stored task under its Idempotency-Key even when this process would refuse its callback on sight', async () => {
    const principal = await fundedPrincipal('stored-callback');
    const callbackUrl = 'http://10.9.9.9/hook';
    const hooked = { ...body, metadata: { ...body.metadata, callback_url: callbackUrl } };
    // Stored by a first attempt on a process that allowed 10.0.0.0/8 (or ran a version that did
    // not look), which died before it held the price and started the workflow.
    const taskId = newId('task');
    const input: VideoTaskWorkflowInput = {
      taskId, accountId: principal.accountId, keyId: principal.keyId, modelId: 'seedance-2.0', upstream: 'simulator-seedance',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: body.prompt, seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros: PRICE, deadlineSeconds: 600, requestId: 'req_first', callbackUrl,
    };
    const now = new Date();
    await tasks.insert({
      _id: taskId, account_id: principal.accountId, key_id: principal.keyId, model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: hooked.metadata, price_micros: PRICE, progress: 0, request_id: 'req_first', workflow_started: false, workflow_input: input, recoverable: true,
      webhook: { url: callbackUrl, state: 'pending', attempts: [] }, created_at: now, updated_at: now,
    });
    const strict = service();
    assert.deepEqual(await strict.submit(principal, hooked, 'req_retry', taskId), { task_id: taskId, status: 'submitted' });
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.equal(result.status, 'succeeded', 'run and billed as the first attempt was promised');
    // A new submission with that callback is refused before anything is stored or held.
    const fresh = newId('task');
    await assert.rejects(strict.submit(principal, hooked, 'req_new', fresh), (error: GatewayError) => error.code === 'invalid_request' && error.param === 'metadata.callback_url');
    assert.equal(await tasks.find(fresh), null);
  });

  it('a workflow whose start went through although the api gave up on it runs nothing and bills nothing', async () => {
    const principal = await fundedPrincipal('late-start');
    const taskId = newId('task');
    const input: VideoTaskWorkflowInput = {
      taskId,
      accountId: principal.accountId,
      keyId: principal.keyId,
      modelId: 'seedance-2.0',
      upstream: 'simulator-seedance',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: 'late [sim:delay=0]', seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros: PRICE,
      deadlineSeconds: 600,
      requestId: 'req_late_start',
      // Never called: the caller was told the submission failed and never saw this task id.
      callbackUrl: 'http://127.0.0.1:9/never-called',
    };
    const now = new Date();
    await tasks.insert({
      _id: taskId, account_id: principal.accountId, key_id: principal.keyId, model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: {}, price_micros: PRICE, progress: 0, request_id: 'req_late_start', workflow_started: false, workflow_input: input, created_at: now, updated_at: now,
    });
    await ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference: taskId, operation: 'hold', amountMicros: PRICE });
    // What the api does when workflow.start times out: close the task and give the money back...
    await tasks.finish(taskId, { status: 'failed', error: { code: 'gateway_unavailable', message: 'The task could not be scheduled.' } });
    await ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference: taskId, operation: 'release', amountMicros: PRICE });
    // ...while Temporal did record the start.
    await startTaskWorkflow(stack.temporal.client, stack.taskQueue, input);

    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'gateway_unavailable');
    assert.equal(result.webhook, undefined, 'no callback for a submission its caller saw fail');
    const task = await tasks.find(taskId);
    assert.equal(task?.status, 'failed');
    assert.equal(task?.vendor_task_id, undefined, 'the vendor was never asked');
    assert.equal((await ledger.entries.find({ reference: taskId, operation: 'capture' }).toArray()).length, 0);
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  /** A service over `apiTasks` whose workflow starts are reported to `started`. */
  function serviceRecordingStarts(apiTasks: TaskStore, started: (taskId: string) => void): VideoTaskService {
    const recording = {
      connection: stack.temporal.client.connection,
      workflow: {
        start: async (...args: Parameters<typeof stack.temporal.client.workflow.start>) => {
          started(args[1].workflowId);
          return stack.temporal.client.workflow.start(...args);
        },
      },
    };
    return new VideoTaskService({
      holdDeadlineMs: 2_000, stalledAfterMs: 1_000, catalog, tasks: apiTasks, ledger, accounts,
      temporal: recording as unknown as typeof stack.temporal.client, taskQueue: stack.taskQueue, deadlineSeconds: 600, outboundAllowlist: LOOPBACK, hostNames: LOOPBACK_NAMES,
    });
  }

  it('an api that dies after starting the workflow, before answering: the task waits for its claim, then closes unbilled after the grace, with no callback', async () => {
    const principal = await fundedPrincipal('died-before-answer');
    let taskId = '';
    const dying = serviceRecordingStarts(new TasksDyingOnClaim(stack.database.db), (id) => (taskId = id));
    // Never answered: the caller sees its connection drop, and may well submit again.
    void dying.submit(principal, { ...body, metadata: { ...body.metadata, callback_url: 'http://127.0.0.1:9/never-called' } }, 'req_died');
    await eventually(async () => taskId !== '', 'the workflow start');
    await eventually(async () => (await stack.temporal.client.workflow.getHandle(taskId).describe().then(() => true, () => false)), 'the workflow started');
    // Meanwhile the task is held, not run: the vendor is not asked before the grace.
    await new Promise((resolve) => setTimeout(resolve, ANSWER_GRACE_MS / 2));
    assert.equal((await tasks.find(taskId))?.vendor_task_id, undefined);

    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.deepEqual([result.status, result.error?.code, result.webhook], ['failed', 'gateway_unavailable', undefined]);
    // Closed by the workflow once the grace had passed since the task was stored.
    const decided = await stack.database.db.collection('task_decisions').findOne({ _id: taskId } as never);
    assert.ok(decided!.at.getTime() - (await tasks.find(taskId))!.created_at.getTime() >= ANSWER_GRACE_MS, 'closed only after the grace');
    assert.equal((await tasks.find(taskId))?.vendor_task_id, undefined, 'the vendor was never asked');
    assert.equal(await tasks.decisionOf(taskId), 'abandon');
    // Its webhook is never sent: it does not read as pending for good.
    assert.equal((await tasks.find(taskId))?.webhook?.state, 'stopped');
    assert.equal((await ledger.entries.find({ reference: taskId, operation: 'capture' }).toArray()).length, 0);
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  it('a task whose api died before claiming it for its caller is neither read nor listed while it waits, and its neighbours page as before', async () => {
    const principal = await fundedPrincipal('unclaimed-unlisted', 10_000_000);
    const accepted = [];
    for (let index = 0; index < 2; index++) accepted.push((await service().submit(principal, body, `req_unclaimed_before_${index}`)).task_id);
    let taskId = '';
    void serviceRecordingStarts(new TasksDyingOnClaim(stack.database.db), (id) => (taskId = id)).submit(principal, body, 'req_unclaimed_died');
    await eventually(async () => taskId !== '' && (await stack.temporal.client.workflow.getHandle(taskId).describe().then(() => true, () => false)), 'the workflow started');
    accepted.push((await service().submit(principal, body, 'req_unclaimed_after')).task_id);
    // Its caller saw the connection drop and never learnt the id: to it, and to anyone listing
    // the account's tasks, the submission does not exist (it closes unbilled after the grace).
    assert.equal((await tasks.find(taskId))?.status, 'submitted');
    const reads = new VideoTaskReads(tasks);
    await assert.rejects(reads.find(principal, taskId), (error: unknown) => error instanceof GatewayError && error.code === 'task_not_found');
    assert.deepEqual((await reads.list(principal, { limit: 20 })).tasks.map((task) => task._id), [...accepted].reverse());
    // A page of one right after it still holds a task.
    const first = await reads.list(principal, { limit: 1 });
    assert.deepEqual([first.tasks.map((task) => task._id), first.hasMore], [[accepted[2]], true]);
    const second = await reads.list(principal, { limit: 1, after: accepted[2] });
    assert.deepEqual([second.tasks.map((task) => task._id), second.hasMore], [[accepted[1]], true]);
    assert.deepEqual((await stack.temporal.client.workflow.getHandle(taskId).result()).error?.code, 'gateway_unavailable');
  });

  it('a claim the store cannot record: 503 for a task without an Idempotency-Key, and its workflow closes it unbilled', async () => {
    const principal = await fundedPrincipal('claim-failed');
    let taskId = '';
    const failing = serviceRecordingStarts(new TasksFailingTheClaim(stack.database.db), (id) => (taskId = id));
    await assert.rejects(failing.submit(principal, body, 'req_claim_failed'), (error: GatewayError) => error.code === 'service_unavailable' && /could not be confirmed; nothing was charged/.test(error.message));
    // The money comes back at once, not after the grace: a retry is not refused for balance.
    await eventually(async () => (await ledger.totals(principal.accountId)).held_micros === 0, 'the hold released', ANSWER_GRACE_MS / 2);
    assert.equal(await tasks.decisionOf(taskId), 'abandon');
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.deepEqual([result.status, result.error?.code], ['failed', 'gateway_unavailable']);
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });
});
