import { log } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { webhookAttempts } from '../core/metrics.ts';
import { taskViewJson } from '../core/task-view.ts';
import type { WebhookAttempt } from '../core/video-task.ts';
import { webhookSecretsInForce, type AccountStore } from '../store/accounts.ts';
import type { TaskDocument, TaskStore } from '../store/tasks.ts';
import { deliverWebhookOnce } from './webhook-delivery.ts';

// One webhook attempt per activity call; the workflow owns the schedule and its durable timers.
// The body is rendered from the snapshot with the same function GET uses, so the receiver gets
// byte-for-byte what polling would have returned. The webhook-id is derived from the task, so it
// is the same on every retry and a receiver can de-duplicate on it.

export function webhookIdFor(taskId: string): string {
  return `msg_${taskId}`;
}

/** Tries at recording an attempt, and the pauses between them. */
const RECORD_RETRY_MS = [250, 1_000];

export interface WebhookActivityDependencies {
  tasks: TaskStore;
  accounts: AccountStore;
  dispatcher: Dispatcher;
  publicBaseUrl: string;
  timeoutMs?: number;
  /** Where a record the store would not take is reported (the activity's own log by default). */
  warn?: (message: string, attributes: Record<string, unknown>) => void;
}

export function createWebhookActivities(deps: WebhookActivityDependencies) {
  const warn = deps.warn ?? ((message: string, attributes: Record<string, unknown>) => log.warn(message, attributes));

  /** The attempt on the task's record, tried a few times. It never fails the activity: the
   * receiver has had its answer, and an error here would make a delivered webhook a retry,
   * sent again at every later slot. */
  async function record(taskId: string, attempt: WebhookAttempt, state: NonNullable<TaskDocument['webhook']>['state']): Promise<void> {
    for (let index = 0; ; index++) {
      try {
        return await deps.tasks.recordWebhookAttempt(taskId, attempt, state);
      } catch (error) {
        if (index >= RECORD_RETRY_MS.length) {
          warn('could not record a webhook attempt; the delivery stands', { taskId, attempt: attempt.attempt, outcome: attempt.outcome, error: String(error) });
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS[index]));
      }
    }
  }

  return {
    async deliverTaskWebhook(input: { taskId: string; attempt: number; lastAttempt: boolean }): Promise<{ outcome: WebhookAttempt['outcome']; retryAfterMs?: number }> {
      const task = await deps.tasks.find(input.taskId);
      if (!task?.webhook) throw new Error(`task ${input.taskId} has no webhook to deliver`);
      const account = await deps.accounts.find(task.account_id);
      if (!account) throw new Error(`account ${task.account_id} of task ${input.taskId} is gone`);
      // When it was sent, as the receiver's own log would have it (not when it ended).
      const sentAt = new Date();
      const result = await deliverWebhookOnce({
        url: task.webhook.url,
        webhookId: webhookIdFor(task._id),
        timestamp: Math.floor(Date.now() / 1000),
        body: taskViewJson(task, deps.publicBaseUrl),
        // The current secret and those a rotation's grace period keeps (see AccountStore.rotateWebhookSecret).
        secrets: webhookSecretsInForce(account),
        dispatcher: deps.dispatcher,
        ...(deps.timeoutMs !== undefined ? { timeoutMs: deps.timeoutMs } : {}),
      });
      // The last attempt's failure is the webhook given up: counted apart, for an alert.
      webhookAttempts.inc({ outcome: result.outcome === 'retry' && input.lastAttempt ? 'exhausted' : result.outcome });
      const attempt: WebhookAttempt = { attempt: input.attempt, at: sentAt, outcome: result.outcome, duration_ms: result.durationMs };
      if (result.status !== undefined) attempt.status = result.status;
      if (result.error !== undefined) attempt.error = result.error;
      if (result.detail !== undefined) warn('webhook destination refused', { taskId: task._id, detail: result.detail });
      const state = result.outcome === 'retry' ? (input.lastAttempt ? 'exhausted' : 'pending') : result.outcome;
      await record(task._id, attempt, state);
      const answer: { outcome: WebhookAttempt['outcome']; retryAfterMs?: number } = { outcome: result.outcome };
      if (result.retryAfterMs !== undefined) answer.retryAfterMs = result.retryAfterMs;
      return answer;
    },
  };
}
