import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { unavailableDependency } from '../core/dependency-errors.ts';
import { UNANSWERED_SUBMISSION_GRACE_MS } from '../core/video-task.ts';
import { closeAbandonedTask } from '../store/abandoned-tasks.ts';
import type { BudgetLeaseStore } from '../store/budget-leases.ts';
import type { IdempotencyStore } from '../store/idempotency.ts';
import type { KeyCreationStore } from '../store/key-creations.ts';
import type { Ledger } from '../store/ledger.ts';
import type { RateLimitBlockStore } from '../store/rate-limit-blocks.ts';
import type { TaskDocument, TaskStore } from '../store/tasks.ts';
import { sweepExpiredLeases } from './lease-sweeper.ts';
import { sweepTerminatedRuns } from './terminated-runs.ts';
import type { TaskPruning } from './task-pruning.ts';
import type { SweeperCursorStore } from '../store/sweeper-cursors.ts';

// An api process that dies between storing a task and starting its workflow leaves a task in
// `submitted` that nothing will move. The sweeper finds such tasks once they are older than a
// grace period. The api answers a submission only after its workflow started, so the caller of
// such a task got no answer it can act on: a dropped connection, or an error (a 503 saying that
// nothing was charged) whose close of the task died with the process. The two look the same
// here, also under an Idempotency-Key (the error's release of the key's record may not have
// reached the store), so every such task is closed unbilled (store/abandoned-tasks.ts). A caller
// who retries under its key within the grace resumes the task (api/routes/idempotent-routes.ts);
// one who retries later gets a task of its own under a new id. Started here instead, a keyed
// task answered 503 ran and was billed, its webhook sent, though its caller had been told it
// failed (a crash review: 59 of 60 keyed 503s charged after a store stall and a kill -9 of the
// api). So is a task whose close unstarted was cut short (it still reads `submitted`): the close
// is finished. An api that was only stalled past the grace
// finds its task closed when it claims it for its caller, and answers 503 instead of handing
// out a failed task (api/services/video-tasks.ts). A workflow that did start (the api died before recording it)
// is recorded; it runs only once the api claimed its task for the caller, and closes the task
// itself when no claim comes within the same grace (activities/billing.ts holdFunds).
// A task whose workflow an operator terminated (Terminate in the Web UI: no workflow code runs,
// unlike Cancel) would stay `running` with its money held: the sweeper starts a workflow that
// closes it (terminated-runs.ts).
// The same timer releases the spend leases of dead api processes (lease-sweeper.ts) and deletes
// the rate-limit blocks of past minutes and Idempotency-Key records past their 24 hours, and
// scrubs the sealed plaintexts of keys created under an Idempotency-Key once their 24 hours are
// over (FerretDB has no TTL indexes), and deletes the tasks past the operator's retention
// (task-pruning.ts).

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
    // One task that cannot be moved (Temporal refusing its start, say) must not hold back the
    // others: it is tried again at the next sweep. Temporal out of reach fails them all, each
    // after the client's own retries: the round stops at the first.
    try {
      await sweepUnstartedTask(options, task);
    } catch (error) {
      options.log?.(`sweeper: task ${task._id} left for the next sweep: ${describe(error)}`);
      if (unavailableDependency(error) === 'temporal') break;
    }
  }
  return stale.length;
}

async function sweepUnstartedTask(options: SweeperOptions, task: TaskDocument): Promise<void> {
  // Whether or not it carried an Idempotency-Key, and whether or not the key's record still
  // names it: a record an error answer could not release names it as well as one whose caller
  // saw the connection drop (see above).
  if (!(await workflowExists(options.client, task._id))) {
    const outcome = await closeAbandonedTask(options, task.workflow_input, 'The gateway stopped, stalled or answered an error before this submission\'s task id reached its caller; nothing was charged.');
    options.log?.(outcome === 'closed' ? `sweeper closed task ${task._id}, whose id never reached its caller` : `sweeper found task ${task._id} claimed by its workflow`);
    return;
  }
  // Its workflow started (the api died before recording it): recorded, nothing more. Starting
  // it again was a no-op while it ran, and a second run of a task whose workflow had closed.
  await options.tasks.markWorkflowStarted(task._id);
  options.log?.(`sweeper recorded the started workflow of task ${task._id}`);
}

const describe = (error: unknown) => (error instanceof Error ? error.message : String(error));

async function workflowExists(client: Client, workflowId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

export type SweepOptions = SweeperOptions & {
  leases: BudgetLeaseStore;
  rateLimitBlocks: RateLimitBlockStore;
  idempotency: IdempotencyStore;
  keyCreations: KeyCreationStore;
  cursors: SweeperCursorStore;
  /** Deletes tasks past TASK_RETENTION_DAYS; absent, tasks are kept. */
  pruning?: TaskPruning;
};

/** One round of every sweep, each on its own: one that fails (Temporal unreachable for the
 * unstarted tasks, say) neither skips the others nor stops them at the next round. Resolves
 * with the names of those that failed. */
export async function sweepOnce(options: SweepOptions, now = new Date()): Promise<string[]> {
  // The store's own clean-ups first: the unstarted tasks may wait on Temporal.
  const steps: [string, () => Promise<unknown>][] = [
    ['expired spend leases', () => sweepExpiredLeases(options)],
    ['rate-limit blocks of past minutes', () => options.rateLimitBlocks.deleteExpired(now)],
    // By the store's clock: their times were written on it, by api processes.
    ['expired Idempotency-Key records', () => options.idempotency.deleteExpired()],
    ['key plaintexts kept past their time', () => options.keyCreations.scrubExpired(now)],
    ['unstarted tasks', () => sweepUnstartedTasks(options)],
    ['terminated runs', () => sweepTerminatedRuns(options, now)],
    ['tasks past their retention', () => options.pruning?.run(now) ?? Promise.resolve(0)],
  ];
  const failed: string[] = [];
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (error) {
      failed.push(name);
      options.log?.(`sweeper: ${name}: ${describe(error)}`);
    }
  }
  return failed;
}

export function startSweeper(options: SweepOptions): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void sweepOnce(options).finally(() => (running = false));
  }, options.intervalMs ?? 30_000);
  timer.unref();
  return () => clearInterval(timer);
}
