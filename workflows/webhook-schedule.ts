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
/** Pauses before an attempt that was itself lost (its worker killed mid-way, the store
 * unreadable) is made again in the same slot of the schedule. Moving on to the next slot instead
 * put a worker's restart between a receiver and its webhook for up to the schedule's next delay:
 * 30 minutes after the third attempt, hours after the fifth (a crash review). */
const LOST_ATTEMPT_PAUSES = ['10s', '1m'] as const;

export async function deliverWebhook(taskId: string): Promise<NonNullable<VideoTaskWorkflowResult['webhook']>> {
  // Attempts run on a queue of their own, with slots of their own in every worker: on the task's
  // queue, receivers answering slowly (an attempt waits up to 15 s) for many tasks at once, a
  // failed task's webhook costing its caller nothing, took the slots that holds, submissions and
  // status reads of every other account needed.
  const webhookDelivery = patched(PATCHES.webhooksOwnQueue) ? proxyActivities<Activities>({ ...attemptOptions, taskQueue: webhookTaskQueue(workflowInfo().taskQueue) }) : deliveryOnTaskQueue;
  let retryAfterMs = 0;
  /** Lost attempts of the current slot so far (see LOST_ATTEMPT_PAUSES). */
  let lostInSlot = 0;
  for (let index = 0; index < WEBHOOK_RETRY_SCHEDULE_SECONDS.length; index++) {
    const attempt = `${index + 1} of ${WEBHOOK_RETRY_SCHEDULE_SECONDS.length}`;
    // A lost attempt made again has had its pause; a slot's own delay comes before its first try.
    const delay = lostInSlot > 0 ? 0 : Math.min(Math.max(WEBHOOK_RETRY_SCHEDULE_SECONDS[index]! * 1000, retryAfterMs), WEBHOOK_MAX_DELAY_MS);
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
      // The attempt itself failed (worker lost, store down), which says nothing of the receiver.
      retryAfterMs = 0;
      const pause = LOST_ATTEMPT_PAUSES[lostInSlot];
      if (pause !== undefined && patched(PATCHES.webhookLostAttemptRepeated)) {
        lostInSlot++;
        setCurrentDetails(`Webhook: attempt ${attempt} was lost (worker or store); made again after ${pause}`);
        await sleep(pause);
        index--;
        continue;
      }
    }
    lostInSlot = 0;
  }
  // The last attempt records the webhook given up itself; one cut off (or whose record the store
  // would not take) left the task reading `pending` for good, uncounted by the metric operators
  // alert on. Made sure of here, after any last attempt: a no-op when it was recorded.
  if (patched(PATCHES.webhookGivenUpRecorded)) await bookkeeping.markWebhookGivenUp({ taskId });
  return 'exhausted';
}
