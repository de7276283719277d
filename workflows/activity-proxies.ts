import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';

// Activity options shared by the task's workflow (video-task.ts) and the one that closes a
// terminated task (close-terminated-task.ts).

/** One vendor call (a status read, a cancel); a failed read is simply followed by the next poll. */
export const polling = proxyActivities<Activities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '500ms', maximumInterval: '5s', maximumAttempts: 3, nonRetryableErrorTypes: ['VendorRejected'] },
});

/** Ledger and snapshot writes: idempotent, so they are retried until the store answers. */
export const bookkeeping = proxyActivities<Activities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', nonRetryableErrorTypes: ['SettlementConflict'] },
});
