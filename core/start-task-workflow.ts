import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { videoTaskWorkflow } from '../workflows/video-task.ts';
import { microsToUsd } from './money.ts';
import { taskPriority, type VideoTaskWorkflowInput } from './video-task.ts';

/** Starts the workflow of a stored task (api and sweeper alike); "already started" is success,
 * because the workflow id is the task id and a second start means someone else won the race. */
export async function startTaskWorkflow(client: Client, taskQueue: string, input: VideoTaskWorkflowInput): Promise<void> {
  try {
    await client.workflow.start<typeof videoTaskWorkflow>('videoTaskWorkflow', {
      workflowId: input.taskId,
      taskQueue,
      args: [input],
      priority: taskPriority(input.accountId),
      // Shown in the Temporal Web UI so an operator can tell whose task this is: the summary in
      // the workflow list, the memo and details on the workflow's page.
      memo: { account_id: input.accountId, key_id: input.keyId, model: input.modelId, request_id: input.requestId },
      staticSummary: `${input.modelId}, ${input.request.seconds ?? '?'} s at ${input.request.resolution ?? '?'}, for ${input.accountId}`,
      staticDetails: [
        `**Account** ${input.accountId}, **key** ${input.keyId}, **request** ${input.requestId}`,
        `**Vendor** ${input.upstream} (${input.request.upstreamModel}), **price held** $${microsToUsd(input.holdMicros).toFixed(6)}`,
        `**Deadline** ${input.deadlineSeconds} s from the submission; **webhook** ${input.callbackUrl ? 'yes' : 'none'}`,
      ].join('\n\n'),
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    throw error;
  }
}
