import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { CloseTerminatedTaskInput } from '../core/video-task.ts';
import type { SweeperCursorStore } from '../store/sweeper-cursors.ts';
import type { TaskStore } from '../store/tasks.ts';
import type { closeTerminatedTaskWorkflow } from '../workflows/close-terminated-task.ts';

// Tasks whose workflow an operator terminated: Terminate runs none of the workflow's code, so
// such a task stays open with its price held. Each sweep lists the task queue's runs terminated
// since the last sweep (Temporal's visibility), and starts closeTerminatedTaskWorkflow under
// the id of each one whose task is still open. Where the last sweep got to is kept in the
// store (store/sweeper-cursors.ts): a restarted worker goes on from there, and the first sweep
// ever starts from its own time, leaving runs terminated before this code alone.

/** Visibility lists a closed run with some delay: each round looks this far behind its start. */
const VISIBILITY_LAG_MS = 5 * 60_000;

export interface TerminatedRunSweep {
  tasks: TaskStore;
  cursors: SweeperCursorStore;
  client: Client;
  taskQueue: string;
  log?: (message: string) => void;
}

/** Starts a closing run for each task of the queue whose run was terminated since the last
 * round; resolves with how many it started. */
export async function sweepTerminatedRuns(options: TerminatedRunSweep, now = new Date()): Promise<number> {
  const cursorName = `terminated-runs:${options.taskQueue}`;
  const since = (await options.cursors.read(cursorName)) ?? new Date(now.getTime() - VISIBILITY_LAG_MS);
  const query = `WorkflowType = 'videoTaskWorkflow' AND TaskQueue = '${options.taskQueue}' AND ExecutionStatus = 'Terminated' AND CloseTime > '${since.toISOString()}'`;
  let started = 0;
  for await (const execution of options.client.workflow.list({ query })) {
    const task = await options.tasks.find(execution.workflowId);
    if (!task || (task.status !== 'submitted' && task.status !== 'running')) continue;
    const vendorTaskId = task.vendor_task_id ?? (await vendorTaskOfRun(options.client, execution.workflowId, execution.runId));
    const input: CloseTerminatedTaskInput = vendorTaskId ? { task: task.workflow_input, vendorTaskId } : { task: task.workflow_input };
    if (await startClosing(options, input)) {
      options.log?.(`sweeper started closing task ${task._id}, whose workflow was terminated`);
      started++;
    }
  }
  await options.cursors.write(cursorName, new Date(now.getTime() - VISIBILITY_LAG_MS));
  return started;
}

/** The vendor task a run started, from its history: a run terminated after the vendor answered
 * and before the task recorded it left the id there only. */
async function vendorTaskOfRun(client: Client, workflowId: string, runId: string): Promise<string | undefined> {
  const submissions = new Set<string>();
  for (const event of (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === 'submitToVendor') submissions.add(String(event.eventId));
    const completed = event.activityTaskCompletedEventAttributes;
    const payload = completed?.result?.payloads?.[0];
    if (completed && payload && submissions.has(String(completed.scheduledEventId))) {
      return defaultPayloadConverter.fromPayload<{ vendorTaskId?: string }>(payload).vendorTaskId;
    }
  }
  return undefined;
}

/** False when a run under the task's id is open already (a closing run from an earlier round). */
async function startClosing(options: TerminatedRunSweep, input: CloseTerminatedTaskInput): Promise<boolean> {
  try {
    await options.client.workflow.start<typeof closeTerminatedTaskWorkflow>('closeTerminatedTaskWorkflow', {
      workflowId: input.task.taskId,
      taskQueue: options.taskQueue,
      args: [input],
      memo: { account_id: input.task.accountId, key_id: input.task.keyId, model: input.task.modelId, request_id: input.task.requestId },
    });
    return true;
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw error;
  }
}
