import { createVendorHttp } from '../http.ts';
import { isContentPolicyCode, VendorTransientError, type VendorConnection, type VendorTaskStatus, type VideoVendor } from '../types.ts';
import { SEEDANCE_TASKS_PATH, seedanceCreatedTask, seedanceTask, toSeedanceCreateTaskBody, type SeedanceTask } from './seedance-wire.ts';

export interface SeedanceVendorOptions {
  timeoutMs?: number;
}

/** Maps a Seedance task onto our four states. */
function toVendorTaskStatus(task: SeedanceTask): VendorTaskStatus {
  const vendorMessage = task.error?.message ?? undefined;
  switch (task.status) {
    case 'queued':
      return { state: 'queued' };
    case 'running':
      return { state: 'running' };
    case 'succeeded': {
      const videoUrl = task.content?.video_url;
      // Success without a clip is a vendor glitch, not a result we could hand to the caller;
      // reading the task again later is the only useful move.
      if (!videoUrl) throw new VendorTransientError('seedance reported succeeded without content.video_url');
      return { state: 'succeeded', videoUrl };
    }
    case 'failed': {
      const vendorCode = task.error?.code ?? undefined;
      // Seedance names each moderation verdict (InputTextSensitiveContentDetected,
      // OutputVideoSensitiveContentDetected, ...): all of them are the caller's content.
      const code = isContentPolicyCode(vendorCode) ? 'content_policy_violation' : 'generation_failed';
      return { state: 'failed', reason: vendorMessage ?? 'Seedance reported the task failed without a reason.', code, ...(vendorCode !== undefined ? { vendorCode } : {}) };
    }
    // Expired and cancelled are not the model's verdict on the prompt, so they get their own
    // codes: whoever reads the failed task can tell "timed out at the vendor" from "refused".
    case 'expired':
      return { state: 'failed', reason: vendorMessage ?? 'The task expired at Seedance before it finished.', code: 'generation_expired' };
    case 'cancelled':
      return { state: 'failed', reason: vendorMessage ?? 'The task was cancelled at Seedance.', code: 'generation_cancelled' };
    default:
      // A status this adapter does not know yet: keep polling rather than guess a final state.
      throw new VendorTransientError(`seedance answered an unknown task status '${task.status}'`);
  }
}

export function createSeedanceVideoVendor(connection: VendorConnection, options: SeedanceVendorOptions = {}): VideoVendor {
  const http = createVendorHttp({ vendor: 'seedance', baseUrl: connection.baseUrl, apiKey: connection.apiKey, timeoutMs: options.timeoutMs });
  const taskPath = (vendorTaskId: string) => `${SEEDANCE_TASKS_PATH}/${encodeURIComponent(vendorTaskId)}`;

  return {
    async start(request, idempotencyKey) {
      const created = await http.json('POST', SEEDANCE_TASKS_PATH, seedanceCreatedTask, toSeedanceCreateTaskBody(request), idempotencyKey);
      return { vendorTaskId: created.id };
    },

    async status(vendorTaskId) {
      return toVendorTaskStatus(await http.json('GET', taskPath(vendorTaskId), seedanceTask));
    },

    async cancel(vendorTaskId) {
      // Seedance cancels only queued tasks (a running one answers 4xx, which the workflow
      // ignores as best effort).
      await http.deleteUnlessGone(taskPath(vendorTaskId));
    },
  };
}
