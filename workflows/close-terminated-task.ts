import { ActivityFailure, ApplicationFailure, CancellationScope, patched, sleep } from '@temporalio/workflow';
import type { CloseTerminatedTaskInput, TaskError, VideoTaskWorkflowResult } from '../core/video-task.ts';
import { bookkeeping, polling } from './activity-proxies.ts';
import { deliverWebhook } from './webhook-schedule.ts';
import { showFinished } from './final-details.ts';
import { PATCHES } from './patches.ts';

// Closes a task whose videoTaskWorkflow run an operator terminated (Terminate in the Web UI,
// `temporal workflow terminate`): that runs none of the workflow's code, so the task stayed
// open with its price held and its webhook unsent. The worker's sweeper starts this workflow
// under the task's id (worker/sweeper.ts). It ends the task as a Cancel would have: the vendor
// task cancelled, the hold released, the task failed `cancelled`, the webhook sent; unless the
// terminated run had already captured the price (it was stopped between settling and
// recording the task), in which case the task is recorded succeeded, as it was paid for.
//
// A workflow type of its own, not a flag on videoTaskWorkflow: during a rolling deploy a worker
// without this code fails the workflow task (unknown type) and leaves it to one with it, where
// a flag it did not know would have made it generate, and bill, the clip.

/** Pauses before reading the vendor again for a paid task's clip, after a read failed (each read
 * is an activity with its own three tries): about nine minutes in all, for a vendor's blip. */
const PAID_REREAD_PAUSES = ['5s', '15s', '30s', '1m', '2m', '5m'] as const;

const STOPPED: TaskError = { code: 'cancelled', message: 'The task was stopped by an operator (its workflow was terminated); nothing was charged.' };

export async function closeTerminatedTaskWorkflow(input: CloseTerminatedTaskInput): Promise<VideoTaskWorkflowResult> {
  const { task, vendorTaskId } = input;
  /** Paid for: the clip is the caller's. Its address, when the vendor still gives it. */
  const recordPaid = async (): Promise<VideoTaskWorkflowResult> => {
    // The capture again, which moves no money (one capture per task) but writes the usage
    // record the terminated run may not have got to: per-key spend must match the ledger.
    if (patched(PATCHES.paidCloseRecordsUsage)) {
      await bookkeeping.settleHold({ taskId: task.taskId, accountId: task.accountId, keyId: task.keyId, modelId: task.modelId, amountMicros: task.holdMicros, outcome: 'capture', videoSeconds: task.request.seconds ?? 0 });
    }
    const read = () => (vendorTaskId ? polling.readVendorStatus({ upstream: task.upstream, vendorTaskId }).catch(() => undefined) : Promise.resolve(undefined));
    let status = await read();
    if (vendorTaskId && patched(PATCHES.paidCloseRereadsVendor)) {
      for (const pause of PAID_REREAD_PAUSES) {
        if (status !== undefined) break;
        await sleep(pause);
        status = await read();
      }
    }
    const url = status?.state === 'succeeded' ? status.videoUrl : undefined;
    await bookkeeping.finishTask({ taskId: task.taskId, outcome: url ? { status: 'succeeded', url } : { status: 'succeeded' } });
    return url ? { status: 'succeeded', url } : { status: 'succeeded' };
  };
  const result = await CancellationScope.nonCancellable(async (): Promise<VideoTaskWorkflowResult> => {
    if ((await bookkeeping.findSettlement({ taskId: task.taskId, accountId: task.accountId })) === 'captured') return recordPaid();
    if (vendorTaskId) await polling.cancelVendorTask({ upstream: task.upstream, vendorTaskId }).catch(() => undefined);
    // Read again after the cancel: a capture the terminated run had under way (Terminate stops
    // no activity) may have landed since.
    const settlement = await bookkeeping.findSettlement({ taskId: task.taskId, accountId: task.accountId });
    if (settlement === 'captured') return recordPaid();
    if (settlement === 'held') {
      try {
        await bookkeeping.settleHold({ taskId: task.taskId, accountId: task.accountId, keyId: task.keyId, modelId: task.modelId, amountMicros: task.holdMicros, outcome: 'release', videoSeconds: 0 });
      } catch (error) {
        // That capture landed between the read and the release: the money decides.
        if (!(error instanceof ActivityFailure && error.cause instanceof ApplicationFailure && error.cause.type === 'SettlementConflict')) throw error;
        return recordPaid();
      }
    }
    await bookkeeping.finishTask({ taskId: task.taskId, outcome: { status: 'failed', error: STOPPED } });
    return { status: 'failed', error: STOPPED };
  });
  if (task.callbackUrl) result.webhook = await CancellationScope.nonCancellable(() => deliverWebhook(task.taskId));
  showFinished(result, task.callbackUrl ? 'sent' : 'none');
  return result;
}
