import { patched, proxyActivities, setCurrentDetails, sleep, workflowInfo, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import { WEBHOOK_RETRY_SCHEDULE_SECONDS, webhookTaskQueue, type VideoTaskWorkflowResult } from '../core/video-task.ts';
import { bookkeeping } from './activity-proxies.ts';
import { PATCHES } from './patches.ts';

// A final task's webhook, on the published retry schedule: durable timers between attempts,
// each attempt one activity (no activity retries), Retry-After honoured up to a day. Shared by
// the task's own workflow and the run that closes a terminated one (close-terminated-task.ts).

const attemptOptions: ActivityOptions = { startToCloseTimeout: '45s', retry: { maximumAttempts: 1 } };
/** Runs before PATCHES.webhooksOwnQueue took attempts on the task's own queue. */
const deliveryOnTaskQueue = proxyActivities<Activities>(attemptOptions);

const WEBHOOK_MAX_DELAY_MS = 24 * 3600 * 1000;

export async function deliverWebhook(taskId: string): Promise<NonNullable<VideoTaskWorkflowResult['webhook']>> {
  // Attempts run on a queue of their own, with slots of their own in every worker: on the task's
  // queue, receivers answering slowly (an attempt waits up to 15 s) for many tasks at once, a
  // failed task's webhook costing its caller nothing, took the slots that holds, submissions and
  // status reads of every other account needed.
  const webhookDelivery = patched(PATCHES.webhooksOwnQueue) ? proxyActivities<Activities>({ ...attemptOptions, taskQueue: webhookTaskQueue(workflowInfo().taskQueue) }) : deliveryOnTaskQueue;
  let retryAfterMs = 0;
  for (let index = 0; index < WEBHOOK_RETRY_SCHEDULE_SECONDS.length; index++) {
    const delay = Math.min(Math.max(WEBHOOK_RETRY_SCHEDULE_SECONDS[index]! * 1000, retryAfterMs), WEBHOOK_MAX_DELAY_MS);
    const attempt = `${index + 1} of ${WEBHOOK_RETRY_SCHEDULE_SECONDS.length}`;
    // What the operator reads on the workflow's page while it waits (no history event of its own).
    if (delay > 0) {
      setCurrentDetails(`Webhook: attempt ${attempt} at ${new Date(Date.now() + delay).toISOString()}`);
      await sleep(delay);
    }
    setCurrentDetails(`Webhook: attempt ${attempt} under way`);
    const lastAttempt = index === WEBHOOK_RETRY_SCHEDULE_SECONDS.length - 1;
    try {
      const answer = await webhookDelivery.deliverTaskWebhook({ taskId, attempt: index + 1, lastAttempt });
      if (answer.outcome !== 'retry') return answer.outcome;
      retryAfterMs = answer.retryAfterMs ?? 0;
    } catch {
      retryAfterMs = 0; // the attempt itself failed (worker lost, store down): next slot of the schedule
    }
  }
  // The last attempt records the webhook given up itself; one cut off (or whose record the store
  // would not take) left the task reading `pending` for good, uncounted by the metric operators
  // alert on. Made sure of here, after any last attempt: a no-op when it was recorded.
  if (patched(PATCHES.webhookGivenUpRecorded)) await bookkeeping.markWebhookGivenUp({ taskId });
  return 'exhausted';
}
