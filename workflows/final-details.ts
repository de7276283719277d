import { setCurrentDetails } from '@temporalio/workflow';
import type { VideoTaskWorkflowResult } from '../core/video-task.ts';

// What the Temporal Web UI shows as a finished run's current details. Without it, a closed run
// kept its last step's words ("Webhook: attempt 1 of 10 under way", "Settling: …"), and an
// operator reading them thought the work still went on. Not a command: no history changes.

const WEBHOOK_ENDS: Record<NonNullable<VideoTaskWorkflowResult['webhook']>, string> = {
  delivered: 'webhook delivered',
  gone: 'webhook stopped by its receiver (410 Gone)',
  refused: 'webhook not sent (its destination is not allowed)',
  exhausted: 'webhook given up (every attempt failed)',
};

/** Sets the finished run's details from its result. */
export function showFinished(result: VideoTaskWorkflowResult, webhook: 'sent' | 'none' | 'not for an abandoned submission'): void {
  const ending = result.webhook ? WEBHOOK_ENDS[result.webhook] : webhook === 'none' ? 'no webhook asked for' : 'no webhook (its submission was never answered)';
  setCurrentDetails(`Done: task ${result.status}; ${ending}`);
}
