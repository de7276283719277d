import { proxyActivities, setCurrentDetails, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import { WEBHOOK_RETRY_SCHEDULE_SECONDS, type VideoTaskWorkflowResult } from '../core/video-task.ts';

// A final task's webhook, on the published retry schedule: durable timers between attempts,
// each attempt one activity (no activity retries), Retry-After honoured up to a day. Shared by
// the task's own workflow and the run that closes a terminated one (close-terminated-task.ts).

const webhookDelivery = proxyActivities<Activities>({ startToCloseTimeout: '45s', retry: { maximumAttempts: 1 } });

const WEBHOOK_MAX_DELAY_MS = 24 * 3600 * 1000;

export async function deliverWebhook(taskId: string): Promise<NonNullable<VideoTaskWorkflowResult['webhook']>> {
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
  return 'exhausted';
}
