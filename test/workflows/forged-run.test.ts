import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { newId } from '../../core/ids.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import type { videoTaskWorkflow } from '../../workflows/video-task.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// A task's workflow started by someone who reached Temporal rather than by the gateway: the
// worker runs whatever input it is handed, so the first activity checks it against the task the
// api stored. A run naming another account, or another price, holds nothing and fails.

const PRICE = 160_000;
const BALANCE = 1_000_000;

describe('a task run not started by the gateway', () => {
  let stack: VideoStack;
  let ledger: Ledger;
  let tasks: TaskStore;
  let accounts: AccountStore;

  before(async () => {
    stack = await startVideoStack('forged-run');
    ledger = new Ledger(stack.database.db);
    tasks = new TaskStore(stack.database.db);
    accounts = new AccountStore(stack.database.db);
  });
  after(() => stack.close());

  function inputFor(taskId: string, accountId: string, holdMicros: number): VideoTaskWorkflowInput {
    return {
      taskId, accountId, keyId: 'key_victim', modelId: 'seedance-2.0', upstream: 'simulator-seedance',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: 'forged [sim:delay=0]', seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros, deadlineSeconds: 600, requestId: 'req_forged',
    };
  }

  async function failsUnheld(workflowId: string, input: VideoTaskWorkflowInput, why: RegExp): Promise<void> {
    const run = stack.temporal.client.workflow.execute<typeof videoTaskWorkflow>('videoTaskWorkflow', { workflowId, taskQueue: stack.taskQueue, args: [input] });
    await assert.rejects(run, (error: unknown) => {
      assert.ok(error instanceof WorkflowFailedError, String(error));
      assert.ok(error.cause instanceof ActivityFailure, String(error.cause));
      assert.ok(error.cause.cause instanceof ApplicationFailure, String(error.cause.cause));
      assert.equal(error.cause.cause.type, 'TaskInputMismatch');
      assert.match(error.cause.cause.message, why);
      return true;
    });
    const totals = await ledger.totals(input.accountId);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [BALANCE, 0, 0]);
  }

  it('holds nothing for a task id the gateway never stored', { timeout: 60_000 }, async () => {
    const victim = await accounts.create({ name: 'victim', balanceMicros: BALANCE });
    const taskId = newId('task');
    await failsUnheld(taskId, inputFor(taskId, victim._id, 50_000), /no task with this id was stored/);
    assert.equal(await tasks.find(taskId), null);
  });

  it("holds nothing for a stored task's id with another account or price, and leaves the task as it was", { timeout: 60_000 }, async () => {
    const victim = await accounts.create({ name: 'victim-stored', balanceMicros: BALANCE });
    const bystander = await accounts.create({ name: 'bystander', balanceMicros: BALANCE });
    const taskId = newId('task');
    const input = inputFor(taskId, bystander._id, PRICE);
    const now = new Date();
    await tasks.insert({
      _id: taskId, account_id: bystander._id, key_id: 'key_victim', model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: {}, price_micros: PRICE, progress: 0, request_id: 'req_forged', workflow_started: false, workflow_input: input, created_at: now, updated_at: now,
    });
    // The task's own workflow id with another account, then another price (its first run is
    // closed by then, so the id may be reused), then the task's input word for word under
    // another id: a second run of a live task would reach the vendor.
    await failsUnheld(taskId, inputFor(taskId, victim._id, PRICE), /does not match the stored task/);
    await failsUnheld(taskId, inputFor(taskId, bystander._id, 10 * PRICE), /does not match the stored task/);
    await failsUnheld(`${taskId}-again`, input, new RegExp(`workflow id ${taskId}-again is not the task's`));
    assert.equal((await tasks.find(taskId))?.status, 'submitted');
  });
});
