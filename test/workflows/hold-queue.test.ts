import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { Ledger } from '../../store/ledger.ts';
import type { TaskStore } from '../../store/tasks.ts';
import { sweepUnstartedTasks } from '../../worker/sweeper.ts';
import { LedgerHeldBack } from '../helpers/budget-stores.ts';
import { body, eventually, PRICE, startHalfwaySubmissions, type HalfwaySubmissions } from '../helpers/halfway-submissions.ts';
import type { VideoStack } from '../helpers/video-stack.ts';

// A submission waits for its hold on the balance in its account's queue, up to a deadline
// (2 s here). Holds that do not come are answered 503 ("nothing was charged") and their tasks
// closed unbilled, however late the store catches up; a queue that is stalled, or too long to
// reach a hold in time, refuses a newcomer at once; one that moves slowly but steadily does not.

/** A ledger whose holds take `holdMs` each, one after another: a slow store that keeps up. */
class LedgerSlowOnHolds extends Ledger {
  private turns: Promise<unknown> = Promise.resolve();
  constructor(
    db: ConstructorParameters<typeof Ledger>[0],
    private readonly holdMs: number,
  ) {
    super(db);
  }
  override async apply(input: Parameters<Ledger['apply']>[0]) {
    if (input.operation === 'hold') {
      const turn = this.turns.then(() => new Promise((resolve) => setTimeout(resolve, this.holdMs)));
      this.turns = turn;
      await turn;
    }
    return super.apply(input);
  }
}

describe('video submissions whose holds come late or not at all', () => {
  let stack: VideoStack;
  let tasks: TaskStore;
  let ledger: Ledger;
  let service: HalfwaySubmissions['service'];
  let fundedPrincipal: HalfwaySubmissions['fundedPrincipal'];
  before(async () => {
    ({ stack, tasks, ledger, service, fundedPrincipal } = await startHalfwaySubmissions('hold-queue'));
  });
  after(() => stack.close());

  it('holds that do not come: 503 after the hold deadline, later submissions refused at once while the queue is stalled; nothing stays held', async () => {
    const principal = await fundedPrincipal('stuck-holds', 10_000_000);
    const stuck = new LedgerHeldBack(stack.database.db, 'hold');
    const submissions = service({ ledger: stuck });
    const started = performance.now();
    const refusals = await Promise.all(
      Array.from({ length: 4 }, (_, index) =>
        submissions.submit(principal, body, `req_stuck_${index}`).then(
          () => assert.fail('a submission without its hold was accepted'),
          (error: unknown) => ({ error, ms: performance.now() - started }),
        ),
      ),
    );
    for (const { error, ms } of refusals) {
      assert.ok(error instanceof GatewayError && error.code === 'service_unavailable', String(error));
      assert.equal(error.headers['retry-after'], '2', 'a 503 says when to come back');
      assert.ok(ms > 1_900 && ms < 4_000, `refused after ${ms.toFixed(0)} ms`);
    }
    // Those holds are still queued (the oldest for over a second): the next one does not join.
    const next = performance.now();
    await assert.rejects(submissions.submit(principal, body, 'req_stuck_next'), (error: GatewayError) => error.code === 'service_unavailable');
    assert.ok(performance.now() - next < 1_000, 'refused without waiting');
    // Asked before an Idempotency-Key is claimed: the same 503, unless the body is invalid,
    // which is told as without a key (a retry would not help).
    assert.throws(() => submissions.refuseIfQueueHopeless(principal, body), (error: GatewayError) => error.code === 'service_unavailable');
    assert.throws(() => submissions.refuseIfQueueHopeless(principal, { ...body, seconds: '999' }), (error: GatewayError) => error.status === 400 && error.param === 'seconds');

    // The store catches up: the holds land, every refused task is closed and its hold released.
    stuck.openGate();
    await eventually(async () => {
      const stored = await tasks.collection.find({ account_id: principal.accountId }).toArray();
      const started = await Promise.all(stored.map((task) => tasks.workflowStarted(task._id)));
      return stored.length === 4 && stored.every((task, index) => task.status === 'failed' && started[index]);
    }, 'the four stored tasks are closed');
    await eventually(async () => (await ledger.totals(principal.accountId)).held_micros === 0, 'nothing stays held');
    assert.equal(await sweepUnstartedTasks({ tasks, ledger, client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 0 }), 0);
    // Their holds, still queued when their callers were answered, were withdrawn when their turn
    // came: held and released, they would have put two movements each into the queue that made
    // those callers wait.
    const refusedTasks = await tasks.collection.find({ account_id: principal.accountId }).toArray();
    assert.deepEqual(await ledger.entries.find({ reference: { $in: refusedTasks.map((task) => task._id) } }).toArray(), [], 'no hold and no release of a refused submission');
    for (const task of refusedTasks) assert.match(task.error?.message ?? '', /could not be reserved in time, so its submission was answered 503\. It never ran, and nothing was charged\./);

    // And submissions are accepted again.
    const accepted = await submissions.submit(principal, body, 'req_after_stuck');
    assert.equal((await stack.temporal.client.workflow.getHandle(accepted.task_id).result()).status, 'succeeded');
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [10_000_000 - PRICE, 0, PRICE]);
  });

  it('a keyed submission answered the hold deadline\'s 503 ("nothing was charged") whose api died before it could close the task or free its key: the sweeper does not start it, and nothing is charged', async () => {
    const principal = await fundedPrincipal('keyed-503-api-died');
    const taskId = newId('task');
    // The key's record, as the api claimed it for this attempt (api/plugins/idempotency.ts).
    const idempotency = new IdempotencyStore(stack.database.db);
    await idempotency.claim({ id: `${principal.keyId}:keyed-503`, fingerprint: 'keyed-503', taskId, now: new Date() });
    // The store hangs at the hold: the caller gets the deadline's 503, which says nothing was charged.
    const stuck = new LedgerHeldBack(stack.database.db, 'hold');
    await assert.rejects(service({ ledger: stuck }).submit(principal, body, 'req_keyed_503', taskId), (error: GatewayError) => error.code === 'service_unavailable' && /nothing was charged/.test(error.message));
    // The process is killed now (kill -9, or a stop of the stack): its close of the task, queued
    // behind the hold, never runs, and the release of the key's record never reached the store
    // either, so the record still names the task. The hold never lands (the gate stays shut).
    assert.equal((await tasks.find(taskId))?.status, 'submitted');
    assert.equal(await stack.database.db.collection('idempotency_keys').countDocuments({ task_id: taskId }), 1);

    await sweepUnstartedTasks({ tasks, ledger, client: stack.temporal.client, taskQueue: stack.taskQueue, graceMs: 0 });
    const handle = stack.temporal.client.workflow.getHandle(taskId);
    const run = await handle.describe().then(() => handle.result(), () => undefined);
    assert.notEqual(run?.status, 'succeeded', 'a submission answered "nothing was charged" ran');
    const task = await tasks.find(taskId);
    assert.deepEqual([task?.status, task?.error?.code], ['failed', 'gateway_unavailable']);
    const totals = await ledger.totals(principal.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });

  it('holds that come slowly but steadily: a submission joining a queue whose oldest waited past the stall limit is accepted', async () => {
    // Holds 300 ms apart; the stall limit is 1 s. The queue moves, so it is not stalled.
    const principal = await fundedPrincipal('slow-holds', 10_000_000);
    const submissions = service({ ledger: new LedgerSlowOnHolds(stack.database.db, 300) });
    const first = Array.from({ length: 4 }, (_, index) => submissions.submit(principal, body, `req_slow_${index}`));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const late = await submissions.submit(principal, body, 'req_slow_late');
    assert.equal(late.status, 'submitted');
    for (const answer of await Promise.all(first)) assert.equal(answer.status, 'submitted');
  });

  it('a queue too long to reach a hold in time: the newcomer is refused at once, with the wait in Retry-After', async () => {
    // Holds 300 ms apart and a 2 s deadline: about six can be waiting; the rest are told at once.
    const principal = await fundedPrincipal('long-queue', 10_000_000);
    const submissions = service({ ledger: new LedgerSlowOnHolds(stack.database.db, 300) });
    const early = Array.from({ length: 3 }, (_, index) => submissions.submit(principal, body, `req_queue_${index}`));
    await Promise.all(early);
    const started = performance.now();
    const burst = await Promise.allSettled(Array.from({ length: 12 }, (_, index) => submissions.submit(principal, body, `req_queue_burst_${index}`)));
    const refusals = burst.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as GatewayError] : []));
    const told = burst.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : 'accepted')).join('; ');
    // Every refusal is a 503 with Retry-After: at once for the queue's length, or (on a loaded
    // machine, where a queued hold can miss its 2 s) at the hold deadline.
    for (const refusal of refusals) {
      assert.ok(refusal instanceof GatewayError && refusal.code === 'service_unavailable' && refusal.headers['retry-after'], told);
      assert.match(refusal.message, /waiting for their hold on its balance here|could not be reserved in time/, told);
    }
    const refusedAtOnce = refusals.filter((refusal) => /waiting for their hold on its balance here/.test(refusal.message));
    assert.ok(refusedAtOnce.length >= 3, `${refusedAtOnce.length} of 12 refused at once: ${told}`);
    assert.ok(burst.some((outcome) => outcome.status === 'fulfilled'), 'the queue still takes what it can hold in time');
    assert.ok(performance.now() - started < 4_000);
    await eventually(async () => (await ledger.totals(principal.accountId)).held_micros + (await ledger.totals(principal.accountId)).spent_micros > 0, 'holds landed');
  });
});
