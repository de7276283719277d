import { log } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { unavailableDependency } from '../core/dependency-errors.ts';
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

/** How long the reads before an attempt (the task, its account's secrets) are tried again while
 * the store fails. Failed at once, a store blip of a few seconds cost the receiver a slot of its
 * schedule unsent and unrecorded, and the next slot was minutes to hours away (an outage
 * review). It fits the attempt's 45 s with the receiver's 15 s (30 s at most) and the record. */
const READ_RETRY_FOR_MS = 10_000;
const READ_RETRY_PAUSES_MS = [250, 500, 1_000, 2_000];

export interface WebhookActivityDependencies {
  tasks: TaskStore;
  accounts: AccountStore;
  dispatcher: Dispatcher;
  publicBaseUrl: string;
  timeoutMs?: number;
  /** Where a record the store would not take is reported (the activity's own log by default). */
  warn?: (message: string, attributes: Record<string, unknown>) => void;
  /** READ_RETRY_FOR_MS unless told (tests). */
  readRetryForMs?: number;
}

export function createWebhookActivities(deps: WebhookActivityDependencies) {
  const warn = deps.warn ?? ((message: string, attributes: Record<string, unknown>) => log.warn(message, attributes));

  /** The attempt on the task's record, tried a few times. It never fails the activity: the
   * receiver has had its answer, and an error here would make a delivered webhook a retry,
   * sent again at every later slot. */
  async function record(taskId: string, attempt: WebhookAttempt, state: NonNullable<TaskDocument['webhook']>['state']): Promise<'recorded' | 'given up before' | 'unrecorded'> {
    for (let index = 0; ; index++) {
      try {
        const before = await deps.tasks.recordWebhookAttempt(taskId, attempt, state);
        // A task gone has nothing recorded (and nothing to count).
        return before === undefined ? 'unrecorded' : before === 'exhausted' ? 'given up before' : 'recorded';
      } catch (error) {
        if (index >= RECORD_RETRY_MS.length) {
          warn('could not record a webhook attempt; the delivery stands', { taskId, attempt: attempt.attempt, outcome: attempt.outcome, error: String(error) });
          return 'unrecorded';
        }
        await new Promise((resolve) => setTimeout(resolve, RECORD_RETRY_MS[index]));
      }
    }
  }

  /** A read, tried again while the store is unavailable, until `readRetryForMs` after
   * `startedAt` (a try that would start past it is not made: a hung store holds each try for
   * seconds). What it finds (a task or account gone included), or any other failure, is its
   * answer at once. */
  async function readThroughBlips<T>(read: () => Promise<T>, startedAt: number): Promise<T> {
    for (let index = 0; ; index++) {
      try {
        return await read();
      } catch (error) {
        const pauseMs = READ_RETRY_PAUSES_MS[Math.min(index, READ_RETRY_PAUSES_MS.length - 1)]!;
        if (unavailableDependency(error) !== 'store' || Date.now() + pauseMs - startedAt > (deps.readRetryForMs ?? READ_RETRY_FOR_MS)) throw error;
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }
  }

  return {
    async deliverTaskWebhook(input: { taskId: string; attempt: number; lastAttempt: boolean }): Promise<{ outcome: WebhookAttempt['outcome']; retryAfterMs?: number }> {
      const startedAt = Date.now();
      const task = await readThroughBlips(() => deps.tasks.find(input.taskId), startedAt);
      if (!task?.webhook) throw new Error(`task ${input.taskId} has no webhook to deliver`);
      const account = await readThroughBlips(() => deps.accounts.find(task.account_id), startedAt);
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
      const givenUp = result.outcome === 'retry' && input.lastAttempt;
      if (!givenUp) webhookAttempts.inc({ outcome: result.outcome });
      const attempt: WebhookAttempt = { attempt: input.attempt, at: sentAt, outcome: result.outcome, duration_ms: result.durationMs };
      if (result.status !== undefined) attempt.status = result.status;
      if (result.error !== undefined) attempt.error = result.error;
      if (result.detail !== undefined) warn('webhook destination refused', { taskId: task._id, detail: result.detail });
      const state = result.outcome === 'retry' ? (input.lastAttempt ? 'exhausted' : 'pending') : result.outcome;
      const recorded = await record(task._id, attempt, state);
      // The last attempt's failure is the webhook given up: counted apart, for an alert, and once,
      // by the write that gave it up (this one, or the workflow's markWebhookGivenUp after it).
      if (givenUp && recorded === 'recorded') webhookAttempts.inc({ outcome: 'exhausted' });
      const answer: { outcome: WebhookAttempt['outcome']; retryAfterMs?: number } = { outcome: result.outcome };
      if (result.retryAfterMs !== undefined) answer.retryAfterMs = result.retryAfterMs;
      return answer;
    },

    /** The webhook given up, after the last attempt: when that attempt was cut off or could not
     * record itself, the task reads `exhausted` from here, and the metric counts it once, for the
     * alert; otherwise nothing. Retried until the store takes it. */
    async markWebhookGivenUp(input: { taskId: string }): Promise<void> {
      if (await deps.tasks.endPendingWebhook(input.taskId, 'exhausted')) webhookAttempts.inc({ outcome: 'exhausted' });
    },
  };
}
