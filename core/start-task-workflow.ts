import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { videoTaskWorkflow } from '../workflows/video-task.ts';
import type { VideoTaskWorkflowInput } from './video-task.ts';

/** Starts the workflow of a stored task (api and sweeper alike); "already started" is success,
 * because the workflow id is the task id and a second start means someone else won the race. */
export async function startTaskWorkflow(client: Client, taskQueue: string, input: VideoTaskWorkflowInput): Promise<void> {
  try {
    await client.workflow.start<typeof videoTaskWorkflow>('videoTaskWorkflow', {
      workflowId: input.taskId,
      taskQueue,
      args: [input],
      // Shown in the Temporal Web UI so an operator can tell whose task this is.
      memo: { account_id: input.accountId, key_id: input.keyId, model: input.modelId, request_id: input.requestId },
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    throw error;
  }
}
