import type { Dispatcher } from 'undici';
import { webhookAttempts } from '../core/metrics.ts';
import { taskViewJson } from '../core/task-view.ts';
import type { WebhookAttempt } from '../core/video-task.ts';
import { webhookSecretsInForce, type AccountStore } from '../store/accounts.ts';
import type { TaskStore } from '../store/tasks.ts';
import { deliverWebhookOnce } from './webhook-delivery.ts';

// One webhook attempt per activity call; the workflow owns the schedule and its durable timers.
// The body is rendered from the snapshot with the same function GET uses, so the receiver gets
// byte-for-byte what polling would have returned. The webhook-id is derived from the task, so it
// is the same on every retry and a receiver can de-duplicate on it.

export function webhookIdFor(taskId: string): string {
  return `msg_${taskId}`;
}

export function createWebhookActivities(deps: { tasks: TaskStore; accounts: AccountStore; dispatcher: Dispatcher; publicBaseUrl: string; timeoutMs?: number }) {
  return {
    async deliverTaskWebhook(input: { taskId: string; attempt: number; lastAttempt: boolean }): Promise<{ outcome: WebhookAttempt['outcome']; retryAfterMs?: number }> {
      const task = await deps.tasks.find(input.taskId);
      if (!task?.webhook) throw new Error(`task ${input.taskId} has no webhook to deliver`);
      const account = await deps.accounts.find(task.account_id);
      if (!account) throw new Error(`account ${task.account_id} of task ${input.taskId} is gone`);
      const result = await deliverWebhookOnce({
        url: task.webhook.url,
        webhookId: webhookIdFor(task._id),
        timestamp: Math.floor(Date.now() / 1000),
        body: taskViewJson(task, deps.publicBaseUrl),
        // Both secrets while a rotation's grace period lasts (see AccountStore.rotateWebhookSecret).
        secrets: webhookSecretsInForce(account),
        dispatcher: deps.dispatcher,
        timeoutMs: deps.timeoutMs ?? 15_000,
      });
      webhookAttempts.inc({ outcome: result.outcome });
      const attempt: WebhookAttempt = { attempt: input.attempt, at: new Date(), outcome: result.outcome, duration_ms: result.durationMs };
      if (result.status !== undefined) attempt.status = result.status;
      if (result.error !== undefined) attempt.error = result.error;
      const state = result.outcome === 'retry' ? (input.lastAttempt ? 'exhausted' : 'pending') : result.outcome;
      await deps.tasks.recordWebhookAttempt(task._id, attempt, state);
      const answer: { outcome: WebhookAttempt['outcome']; retryAfterMs?: number } = { outcome: result.outcome };
      if (result.retryAfterMs !== undefined) answer.retryAfterMs = result.retryAfterMs;
      return answer;
    },
  };
}
