import { ApplicationFailure, Context, type Info } from '@temporalio/activity';
import { vendorErrors } from '../core/metrics.ts';
import type { TaskStore } from '../store/tasks.ts';
import { isContentPolicyCode, VendorRejectedError, VendorTransientError, type VendorTaskStatus, type VideoGenerationRequest, type VideoVendor } from '../vendors/types.ts';
import { UpstreamNotConfiguredError } from '../core/catalog.ts';

// Vendor calls. Errors become Temporal failures whose `type` drives the retry policy:
// VendorTransient is retried on the activity's backoff, or later when the vendor's Retry-After
// asks for more; VendorRejected is listed in nonRetryableErrorTypes and ends the task as failed.

export type VendorLookup = (upstream: string) => VideoVendor;

/**
 * How long to wait before the next try: the retry policy's own delay after this attempt, or
 * the vendor's Retry-After when that is longer. A failure's nextRetryDelay replaces the
 * policy's backoff instead of adding to it, so passing Retry-After alone had a vendor that
 * stays down (answering 503 with `Retry-After: 1`) called every second for the submission's
 * 30 minutes, about 1,800 times for one task.
 */
export function nextTryDelayMs(info: Pick<Info, 'attempt' | 'retryPolicy'>, retryAfterMs: number | undefined): number | undefined {
  if (retryAfterMs === undefined) return undefined;
  const policy = info.retryPolicy;
  const initial = policy?.initialInterval;
  // Without the policy (an old server does not send it) the vendor's word is all there is.
  if (typeof initial !== 'number') return retryAfterMs;
  const maximum = typeof policy?.maximumInterval === 'number' ? policy.maximumInterval : initial * 100;
  const scheduled = Math.min(initial * (policy?.backoffCoefficient ?? 2) ** (info.attempt - 1), maximum);
  return Math.max(scheduled, retryAfterMs);
}

/** Statuses that refuse the request itself (its prompt, its parameters, its content): the
 * vendor's words tell the caller what to change. */
const REQUEST_REFUSALS = new Set([400, 409, 413, 422]);

/**
 * A vendor failure as the task's caller reads it (the workflow puts it in the task's error).
 * The vendor's own words only for a refusal of the request itself; otherwise its status and
 * code alone: its words for a 401 quote the operator's key ("Incorrect API key provided:
 * sk-proj-AbC1****"), and a network error names the vendor's address. Those words stay in the
 * failure's details, for operators in the Web UI.
 */
export function callerWording(error: VendorRejectedError | VendorTransientError): string {
  if (error instanceof VendorRejectedError) {
    if (REQUEST_REFUSALS.has(error.status)) return error.message;
    return `it answered ${error.status}${error.vendorCode ? ` ${error.vendorCode}` : ''}`;
  }
  return error.status === undefined ? 'it did not answer' : `it answered ${error.status}`;
}

/** The Temporal failure for a vendor error, counted by upstream (a plain bug is not counted). */
function asFailure(error: unknown, upstream: string): unknown {
  if (error instanceof VendorRejectedError) {
    vendorErrors.inc({ vendor: upstream, kind: 'rejected' });
    return ApplicationFailure.create({
      message: callerWording(error),
      type: 'VendorRejected',
      nonRetryable: true,
      // The workflow words the task's failure from these (workflows/video-task.ts generate).
      details: [{ status: error.status, vendorCode: error.vendorCode ?? null, contentPolicy: isContentPolicyCode(error.vendorCode), vendorMessage: error.message }],
    });
  }
  if (error instanceof UpstreamNotConfiguredError) {
    // The operator's catalog, not the vendor: no retry (30 minutes of submissions, three tries
    // a status read) can help.
    return ApplicationFailure.create({ message: error.message, type: 'UpstreamNotConfigured', nonRetryable: true });
  }
  if (error instanceof VendorTransientError) {
    vendorErrors.inc({ vendor: upstream, kind: 'transient' });
    return ApplicationFailure.create({
      message: callerWording(error),
      type: 'VendorTransient',
      nextRetryDelay: nextTryDelayMs(Context.current().info, error.retryAfterMs),
      details: [{ status: error.status ?? null, vendorMessage: error.message }],
    });
  }
  return error;
}

/** How long after a submission's first try a vendor's 409 to a later try is taken as the
 * earlier try still being worked on, not as a refusal: beyond one try's 60 s, with room. */
export const IN_FLIGHT_CONFLICT_MS = 5 * 60_000;

/**
 * A 409 to a submission's second or later try, within IN_FLIGHT_CONFLICT_MS of its first: a
 * vendor that keys creates by Idempotency-Key answers 409 while a request under the same key
 * is still being processed (the earlier try, whose answer this activity lost or gave up on).
 * Taken as a refusal it failed the task while the vendor went on to generate its clip, paid
 * by the operator and never delivered; tried again later, the key gets that task back. On the
 * first try there is no earlier request, so a 409 there is the vendor's word on the request.
 */
export function asEarlierTryInFlight(error: unknown, info: Pick<Info, 'attempt' | 'scheduledTimestampMs'>): unknown {
  if (!(error instanceof VendorRejectedError) || error.status !== 409 || info.attempt < 2) return error;
  if (Date.now() - info.scheduledTimestampMs > IN_FLIGHT_CONFLICT_MS) return error;
  return new VendorTransientError(`${error.message} (taken as an earlier try under the same Idempotency-Key still in progress)`, 409);
}

export function createVendorActivities(vendorFor: VendorLookup, tasks?: Pick<TaskStore, 'recordVendorTask'>) {
  return {
    async submitToVendor(input: { taskId: string; upstream: string; request: VideoGenerationRequest }): Promise<{ vendorTaskId: string }> {
      try {
        // The task's id, the same on every try (see VideoVendor.start).
        const started = await vendorFor(input.upstream).start(input.request, input.taskId);
        // Recorded here as well as by the workflow's next step: a run terminated while this
        // activity ran never takes that step, and the sweeper that closes its task must know
        // the vendor job to cancel it (worker/terminated-runs.ts). Best effort: the workflow's
        // own step records it otherwise.
        await tasks?.recordVendorTask(input.taskId, started.vendorTaskId).catch(() => undefined);
        return started;
      } catch (error) {
        throw asFailure(asEarlierTryInFlight(error, Context.current().info), input.upstream);
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
