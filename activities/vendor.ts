import { ApplicationFailure } from '@temporalio/activity';
import { vendorErrors } from '../core/metrics.ts';
import { isContentPolicyCode, VendorRejectedError, VendorTransientError, type VendorTaskStatus, type VideoGenerationRequest, type VideoVendor } from '../vendors/types.ts';

// Vendor calls. Errors become Temporal failures whose `type` drives the retry policy:
// VendorTransient is retried (after the vendor's Retry-After when it sent one), VendorRejected
// is listed in nonRetryableErrorTypes and ends the task as failed.

export type VendorLookup = (upstream: string) => VideoVendor;

/** The Temporal failure for a vendor error, counted by upstream (a plain bug is not counted). */
function asFailure(error: unknown, upstream: string): unknown {
  if (error instanceof VendorRejectedError) {
    vendorErrors.inc({ vendor: upstream, kind: 'rejected' });
    return ApplicationFailure.create({
      message: error.message,
      type: 'VendorRejected',
      nonRetryable: true,
      // The workflow words the task's failure from these (workflows/video-task.ts generate).
      details: [{ status: error.status, vendorCode: error.vendorCode ?? null, contentPolicy: isContentPolicyCode(error.vendorCode) }],
    });
  }
  if (error instanceof VendorTransientError) {
    vendorErrors.inc({ vendor: upstream, kind: 'transient' });
    return ApplicationFailure.create({
      message: error.message,
      type: 'VendorTransient',
      nextRetryDelay: error.retryAfterMs,
      details: [{ status: error.status ?? null }],
    });
  }
  return error;
}

export function createVendorActivities(vendorFor: VendorLookup) {
  return {
    async submitToVendor(input: { taskId: string; upstream: string; request: VideoGenerationRequest }): Promise<{ vendorTaskId: string }> {
      try {
        // The task's id, the same on every try (see VideoVendor.start).
        return await vendorFor(input.upstream).start(input.request, input.taskId);
      } catch (error) {
        throw asFailure(error, input.upstream);
      }
    },

    async readVendorStatus(input: { upstream: string; vendorTaskId: string }): Promise<VendorTaskStatus> {
      try {
        return await vendorFor(input.upstream).status(input.vendorTaskId);
      } catch (error) {
        throw asFailure(error, input.upstream);
      }
    },

    async cancelVendorTask(input: { upstream: string; vendorTaskId: string }): Promise<void> {
      try {
        await vendorFor(input.upstream).cancel(input.vendorTaskId);
      } catch (error) {
        throw asFailure(error, input.upstream);
      }
    },
  };
}
