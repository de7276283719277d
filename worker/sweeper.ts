import type { Client } from '@temporalio/client';
import { startTaskWorkflow } from '../core/start-task-workflow.ts';
import type { BudgetLeaseStore } from '../store/budget-leases.ts';
import type { IdempotencyStore } from '../store/idempotency.ts';
import type { Ledger } from '../store/ledger.ts';
import type { RateLimitBlockStore } from '../store/rate-limit-blocks.ts';
import type { TaskStore } from '../store/tasks.ts';
import { sweepExpiredLeases } from './lease-sweeper.ts';

// An api process that dies between storing a task and starting its workflow leaves a task in
// `submitted` that nothing will move. The sweeper finds such tasks once they are older than a
// grace period and starts their workflow (idempotently: the workflow id is the task id).
// The same timer releases the spend leases of dead api processes (lease-sweeper.ts) and deletes
// the rate-limit blocks of past minutes and Idempotency-Key records past their 24 hours
// (FerretDB has no TTL indexes).

export interface SweeperOptions {
  tasks: TaskStore;
  client: Client;
  taskQueue: string;
  graceMs?: number;
  intervalMs?: number;
  log?: (message: string) => void;
}

export async function sweepUnstartedTasks(options: SweeperOptions): Promise<number> {
  const stale = await options.tasks.findUnstarted(new Date(Date.now() - (options.graceMs ?? 60_000)), 100);
  for (const task of stale) {
    await startTaskWorkflow(options.client, options.taskQueue, task.workflow_input);
    await options.tasks.markWorkflowStarted(task._id);
    options.log?.(`sweeper started the workflow of task ${task._id}`);
  }
  return stale.length;
}

export function startSweeper(options: SweeperOptions & { ledger: Ledger; leases: BudgetLeaseStore; rateLimitBlocks: RateLimitBlockStore; idempotency: IdempotencyStore }): () => void {
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
