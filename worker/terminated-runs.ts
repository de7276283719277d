import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { defaultPayloadConverter, WorkflowIdReusePolicy } from '@temporalio/common';
import { taskPriority, type CloseTerminatedTaskInput } from '../core/video-task.ts';
import type { SweeperCursorStore } from '../store/sweeper-cursors.ts';
import type { TaskDocument, TaskStore } from '../store/tasks.ts';
import type { closeTerminatedTaskWorkflow } from '../workflows/close-terminated-task.ts';

// Tasks whose workflow an operator terminated: Terminate runs none of the workflow's code, so
// such a task stays open with its price held. Each sweep lists the task queue's runs terminated
// since the last sweep (Temporal's visibility), and starts closeTerminatedTaskWorkflow under
// the id of each one whose task is still open. Where the last sweep got to is kept in the
// store (store/sweeper-cursors.ts): a restarted worker goes on from there, and the first sweep
// ever starts from its own time, leaving runs terminated before this code alone. A task that was
// final already (its run was in its webhook retries) stays as it ended; its webhook is marked
// `stopped`.

/** Visibility lists a closed run with some delay: each round looks this far behind its start. */
const VISIBILITY_LAG_MS = 5 * 60_000;
/** A vendor submission under way when its run was terminated goes on (Terminate stops no
 * activity) for up to its 60 s timeout, and records the vendor's id on the task when it gets
 * one (activities/vendor.ts): its task is closed only after that, so the vendor job is known
 * and cancelled. Well within VISIBILITY_LAG_MS, so later rounds still list the run. */
const SUBMISSION_SETTLES_MS = 70_000;
/** A webhook attempt takes at most 45 s, and its record a few more: a terminated run's last
 * attempt has recorded itself this long after the run closed. Within VISIBILITY_LAG_MS too. */
const WEBHOOK_ATTEMPT_SETTLES_MS = 60_000;

export interface TerminatedRunSweep {
  tasks: TaskStore;
  cursors: SweeperCursorStore;
  client: Client;
  taskQueue: string;
  log?: (message: string) => void;
  /** SUBMISSION_SETTLES_MS unless a test shortens it. */
  submissionSettlesMs?: number;
  /** WEBHOOK_ATTEMPT_SETTLES_MS unless a test shortens it. */
  webhookSettlesMs?: number;
}

/** Starts a closing run for each task of the queue whose run was terminated since the last
 * round; resolves with how many it started. */
export async function sweepTerminatedRuns(options: TerminatedRunSweep, now = new Date()): Promise<number> {
  const cursorName = `terminated-runs:${options.taskQueue}`;
  const since = (await options.cursors.read(cursorName)) ?? new Date(now.getTime() - VISIBILITY_LAG_MS);
  // A closing run that was terminated in turn, or failed, leaves its task open just the same.
  const query =
    `TaskQueue = '${options.taskQueue}' AND CloseTime > '${since.toISOString()}' AND ` +
    `((WorkflowType = 'videoTaskWorkflow' AND ExecutionStatus = 'Terminated') OR ` +
    `(WorkflowType = 'closeTerminatedTaskWorkflow' AND (ExecutionStatus = 'Terminated' OR ExecutionStatus = 'Failed')))`;
  let started = 0;
  for await (const execution of options.client.workflow.list({ query })) {
    let task = await options.tasks.find(execution.workflowId);
    if (!task) continue;
    if (task.status !== 'submitted' && task.status !== 'running') {
      await stopWebhookOfFinalTask(options, task, execution, now);
      continue;
    }
    let vendorTaskId = task.vendor_task_id;
    if (!vendorTaskId && execution.type === 'videoTaskWorkflow') {
      const submission = await submissionOfRun(options.client, execution.workflowId, execution.runId);
      if (submission.inFlight && now.getTime() - (execution.closeTime?.getTime() ?? 0) < (options.submissionSettlesMs ?? SUBMISSION_SETTLES_MS)) {
        options.log?.(`sweeper: task ${task._id} waits for the vendor submission its terminated run left under way`);
        continue;
      }
      // The submission may have recorded its vendor id on the task since the read above.
      task = (await options.tasks.find(execution.workflowId)) ?? task;
      vendorTaskId = submission.vendorTaskId ?? task.vendor_task_id;
    }
    const input: CloseTerminatedTaskInput = vendorTaskId ? { task: task.workflow_input, vendorTaskId } : { task: task.workflow_input };
    if (await startClosing(options, input)) {
      options.log?.(`sweeper started closing task ${task._id}, whose workflow was terminated`);
      started++;
    }
  }
  await options.cursors.write(cursorName, new Date(now.getTime() - VISIBILITY_LAG_MS));
  return started;
}

/** A final task whose run was terminated in its webhook retries keeps its state (README), and
 * no attempt will come: its webhook reads `stopped` rather than promise one. Only when that run
 * is the task's latest (a closing run still delivering the webhook leaves it alone), and once an
 * attempt under way when it was terminated (Terminate stops no activity) has recorded itself:
 * on FerretDB two updates of one document at once can lose one. */
async function stopWebhookOfFinalTask(options: TerminatedRunSweep, task: TaskDocument, execution: { workflowId: string; runId: string; closeTime?: Date }, now: Date): Promise<void> {
  if (task.webhook?.state !== 'pending') return;
  if (now.getTime() - (execution.closeTime?.getTime() ?? now.getTime()) < (options.webhookSettlesMs ?? WEBHOOK_ATTEMPT_SETTLES_MS)) return;
  try {
    if ((await options.client.workflow.getHandle(execution.workflowId).describe()).runId !== execution.runId) return;
  } catch (error) {
    // Not this round (Temporal away): the run is listed again in the next ones.
    options.log?.(`sweeper: task ${task._id}'s webhook left for the next sweep: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  if (await options.tasks.endPendingWebhook(task._id, 'stopped')) options.log?.(`sweeper: the webhook of task ${task._id} stopped with its terminated workflow`);
}

/** The vendor task a run's submission got, from its history (a run terminated after the vendor
 * answered and before the task recorded it left the id there only), and whether a submission
 * was still under way when the run closed. */
async function submissionOfRun(client: Client, workflowId: string, runId: string): Promise<{ vendorTaskId?: string; inFlight: boolean }> {
  const underWay = new Set<string>();
  let vendorTaskId: string | undefined;
  for (const event of (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []) {
    if (event.activityTaskScheduledEventAttributes?.activityType?.name === 'submitToVendor') underWay.add(String(event.eventId));
    const ended = event.activityTaskCompletedEventAttributes ?? event.activityTaskFailedEventAttributes ?? event.activityTaskTimedOutEventAttributes ?? event.activityTaskCanceledEventAttributes;
    if (!ended || !underWay.delete(String(ended.scheduledEventId))) continue;
    const payload = event.activityTaskCompletedEventAttributes?.result?.payloads?.[0];
    if (payload) vendorTaskId = defaultPayloadConverter.fromPayload<{ vendorTaskId?: string }>(payload).vendorTaskId;
  }
  return { vendorTaskId, inFlight: underWay.size > 0 };
}

/** False when a run under the task's id is open already (a closing run from an earlier round). */
async function startClosing(options: TerminatedRunSweep, input: CloseTerminatedTaskInput): Promise<boolean> {
  try {
    await options.client.workflow.start<typeof closeTerminatedTaskWorkflow>('closeTerminatedTaskWorkflow', {
      workflowId: input.task.taskId,
      taskQueue: options.taskQueue,
      args: [input],
      // After a closing run that completed, none again (another worker's sweep that read the
      // task open a moment before): only after one that failed or was terminated.
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
      // Its webhook attempt takes its turn among the account's, as the task's own would have.
      priority: taskPriority(input.task.accountId),
      memo: { account_id: input.task.accountId, key_id: input.task.keyId, model: input.task.modelId, request_id: input.task.requestId },
    });
    return true;
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw error;
  }
}
