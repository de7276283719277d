import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { startTaskWorkflow } from '../core/start-task-workflow.ts';
import { UNANSWERED_SUBMISSION_GRACE_MS } from '../core/video-task.ts';
import { closeAbandonedTask } from '../store/abandoned-tasks.ts';
import type { BudgetLeaseStore } from '../store/budget-leases.ts';
import type { IdempotencyStore } from '../store/idempotency.ts';
import type { Ledger } from '../store/ledger.ts';
import type { RateLimitBlockStore } from '../store/rate-limit-blocks.ts';
import type { TaskStore } from '../store/tasks.ts';
import { sweepExpiredLeases } from './lease-sweeper.ts';

// An api process that dies between storing a task and starting its workflow leaves a task in
// `submitted` that nothing will move. The sweeper finds such tasks once they are older than a
// grace period. The api answers a submission only after its workflow started, so the caller of
// such a task got no answer, only a dropped connection: a task whose submission carried an
// Idempotency-Key has its workflow started (idempotently: the workflow id is the task id), and
// the caller's retry under that key gets it; any other is closed unbilled
// (store/abandoned-tasks.ts), since its caller will never know its id and may well have
// submitted again. An api that was only stalled past the grace finds its task closed when it
// claims it for its caller, and answers 503 instead of handing out a failed task
// (api/services/video-tasks.ts). A workflow that did start (the api died before recording it)
// is recorded; it runs only once the api claimed its task for the caller, and closes the task
// itself when no claim comes within the same grace (activities/billing.ts holdFunds).
// The same timer releases the spend leases of dead api processes (lease-sweeper.ts) and deletes
// the rate-limit blocks of past minutes and Idempotency-Key records past their 24 hours
// (FerretDB has no TTL indexes).

export interface SweeperOptions {
  tasks: TaskStore;
  ledger: Ledger;
  client: Client;
  taskQueue: string;
  graceMs?: number;
  intervalMs?: number;
  log?: (message: string) => void;
}

export async function sweepUnstartedTasks(options: SweeperOptions): Promise<number> {
  const stale = await options.tasks.findUnstarted(new Date(Date.now() - (options.graceMs ?? UNANSWERED_SUBMISSION_GRACE_MS)), 100);
  for (const task of stale) {
    if (task.recoverable === false && !(await workflowExists(options.client, task._id))) {
      const outcome = await closeAbandonedTask(options, task.workflow_input, 'The gateway stopped or stalled before it answered this submission, so the task id never reached its caller; nothing was charged.');
      options.log?.(outcome === 'closed' ? `sweeper closed task ${task._id}, whose submission was never answered` : `sweeper found task ${task._id} claimed by its workflow`);
      continue;
    }
    await startTaskWorkflow(options.client, options.taskQueue, task.workflow_input);
    await options.tasks.markWorkflowStarted(task._id);
    options.log?.(`sweeper started the workflow of task ${task._id}`);
  }
  return stale.length;
}

async function workflowExists(client: Client, workflowId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

export function startSweeper(options: SweeperOptions & { leases: BudgetLeaseStore; rateLimitBlocks: RateLimitBlockStore; idempotency: IdempotencyStore }): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweepUnstartedTasks(options)
      .then(() => sweepExpiredLeases(options))
      .then(() => options.rateLimitBlocks.deleteExpired(new Date()))
      .then(() => options.idempotency.deleteExpired(new Date()))
      .catch((error) => options.log?.(`sweeper: ${error instanceof Error ? error.message : String(error)}`))
      .finally(() => (running = false));
  }, options.intervalMs ?? 30_000);
  timer.unref();
  return () => clearInterval(timer);
}
