import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  type ActivityOptions,
  setCurrentDetails,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.ts';
import {
  type TaskError,
  type VideoTaskWorkflowInput,
  type VideoTaskWorkflowResult,
} from '../core/video-task.ts';
import { bookkeeping, polling } from './activity-proxies.ts';
import { getTaskStateQuery, type TaskState } from './definitions.ts';
import { PATCHES } from './patches.ts';
import { submitThroughCancel, submitWaitingThroughCancel } from './submission-through-cancel.ts';
import { deliverWebhook } from './webhook-schedule.ts';
import { showFinished } from './final-details.ts';

// One workflow per video task: hold → submit → poll → settle → final snapshot → webhook.
// Money and snapshots are settled before the webhook, so a caller who hears of a final state
// can already see it (and its bill) through GET.

/** Vendor submission: transient trouble is retried with backoff for up to 30 minutes, and
 * never past the task's deadline (see submissionWithin). */
const SUBMISSION_MAX_MS = 30 * 60_000;
const submissionOptions: ActivityOptions = {
  startToCloseTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', nonRetryableErrorTypes: ['VendorRejected'] },
};
const submission = proxyActivities<Activities>({ ...submissionOptions, scheduleToCloseTimeout: SUBMISSION_MAX_MS });
/** The same, for a workflow that, cancelled, waits for the attempt under way to end (its job
 * then comes back to be cancelled) instead of leaving it to run unseen. */
const waitOnCancel: ActivityOptions = { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED };
const submissionWaitingOnCancel = proxyActivities<Activities>({ ...submissionOptions, ...waitOnCancel, scheduleToCloseTimeout: SUBMISSION_MAX_MS });

/** Submission retried until the task's deadline when that comes first: a deadline under 30
 * minutes (VIDEO_TASK_DEADLINE_SECONDS) held for the whole task, the submission included. */
function submissionWithin(deadline: number, waitingOnCancel = false) {
  return proxyActivities<Activities>({ ...submissionOptions, ...(waitingOnCancel ? waitOnCancel : {}), scheduleToCloseTimeout: Math.max(1_000, Math.min(SUBMISSION_MAX_MS, deadline - Date.now())) });
}

/** Status reads the vendor refused in a row (a 404: the task is gone; a 401) that end a task. */
const MAX_STATUS_REFUSALS = 3;
const POLL_FIRST_MS = 500;
const POLL_MAX_MS = 10_000;

type Outcome = { status: 'succeeded'; url?: string } | { status: 'failed'; error: TaskError };

function failed(code: string, message: string, vendorCode?: string): Outcome {
  return { status: 'failed', error: vendorCode === undefined ? { code, message } : { code, message, vendor_code: vendorCode } };
}

function describeActivityFailure(error: unknown): { type?: string; message: string; details?: unknown } {
  if (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure) {
    return { type: error.cause.type ?? undefined, message: error.cause.message, details: error.cause.details?.[0] };
  }
  return { message: error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error) };
}

/** Where the caller's deadline runs from: the submission, not when a worker got to the task. The
 * workflow's start is the submission, but for a task an older sweeper started (an api crash
 * left it unstarted), whose input says when it was submitted. */
function deadlineStart(input: VideoTaskWorkflowInput): number {
  if (!patched(PATCHES.deadlineFromStart)) return Date.now();
  const startedAt = workflowInfo().startTime.getTime();
  if (input.submittedAt === undefined || !patched(PATCHES.deadlineFromSubmission)) return startedAt;
  return Math.min(startedAt, input.submittedAt);
}

export async function videoTaskWorkflow(input: VideoTaskWorkflowInput): Promise<VideoTaskWorkflowResult> {
  const state: TaskState = { status: 'submitted', progress: 0 };
  setHandler(getTaskStateQuery, () => state);
  const deadline = deadlineStart(input) + input.deadlineSeconds * 1000;

  let outcome: Outcome;
  let held = false;
  // The api answered the caller an error for this submission (its task id was never given out).
  let abandoned = false;
  try {
    // Not cancellable: the api placed this hold before it started the workflow, and an operator's
    // cancel arriving before or during this activity would otherwise leave `held` false, so the
    // hold would never be released.
    setCurrentDetails('Holding the price on the balance');
    const hold = await CancellationScope.nonCancellable(() =>
      bookkeeping.holdFunds({ taskId: input.taskId, accountId: input.accountId, keyId: input.keyId, amountMicros: input.holdMicros }),
    );
    held = hold === 'held';
    abandoned = hold === 'abandoned';
    if (held) outcome = await generate(input, state, deadline);
    else if (abandoned) outcome = failed('gateway_unavailable', 'The submission failed before the task started; nothing was charged.');
    else outcome = failed('insufficient_balance', 'The account balance did not cover this task.');
  } catch (error) {
    if (!isCancellation(error)) throw error;
    outcome = failed('cancelled', 'The task was cancelled by an operator.');
    // The vendor would go on generating (at the gateway's expense) a clip nobody will get.
    const { vendorTaskId } = state;
    if (vendorTaskId) await CancellationScope.nonCancellable(() => polling.cancelVendorTask({ upstream: input.upstream, vendorTaskId }).catch(() => undefined));
  }

  // Whatever happened above (even cancellation), money and snapshot must be settled.
  setCurrentDetails(`Settling: ${held ? (outcome.status === 'succeeded' ? 'capturing the price' : 'releasing the hold') : 'nothing held'}, then recording the task ${outcome.status}`);
  await CancellationScope.nonCancellable(async () => {
    if (held) {
      await bookkeeping.settleHold({
        taskId: input.taskId,
        accountId: input.accountId,
        keyId: input.keyId,
        modelId: input.modelId,
        amountMicros: input.holdMicros,
        outcome: outcome.status === 'succeeded' ? 'capture' : 'release',
        videoSeconds: input.request.seconds ?? 0,
      });
    }
    await bookkeeping.finishTask({ taskId: input.taskId, outcome });
  });
  state.status = outcome.status;
  if (outcome.status === 'succeeded') state.progress = 100;

  const result: VideoTaskWorkflowResult = { status: outcome.status };
  if (outcome.status === 'succeeded' && outcome.url) result.url = outcome.url;
  if (outcome.status === 'failed') result.error = outcome.error;
  // No callback for an abandoned submission: its caller was told it failed and never saw this id.
  if (input.callbackUrl && !abandoned) result.webhook = await CancellationScope.nonCancellable(() => deliverWebhook(input.taskId));
  showFinished(result, !input.callbackUrl ? 'none' : abandoned ? 'not for an abandoned submission' : 'sent');
  return result;
}

/** A submission the vendor refused (activities/vendor.ts gives its code and whether it is the
 * moderation's verdict): the caller's content (content_policy_violation) or another refusal. */
function submissionRefused(failure: { message: string; details?: unknown }): Outcome {
  const message = `The vendor refused the task: ${failure.message}`;
  if (!patched(PATCHES.submissionRefusalCodes)) return failed('vendor_rejected', message);
  const details = (failure.details ?? {}) as { vendorCode?: string | null; contentPolicy?: boolean };
  const vendorCode = typeof details.vendorCode === 'string' ? details.vendorCode : undefined;
  return failed(details.contentPolicy === true ? 'content_policy_violation' : 'vendor_rejected', message, vendorCode);
}

async function generate(input: VideoTaskWorkflowInput, state: TaskState, deadline: number): Promise<Outcome> {
  let vendorTaskId: string;
  const finalRead = patched(PATCHES.deadlineFinalRead);
  // The hold can come late (the worker was down, the store slow): a vendor task started now
  // would be cancelled at once, at the operator's expense.
  if (finalRead && Date.now() >= deadline) {
    return failed('deadline_exceeded', `The task could not be started within its deadline of ${input.deadlineSeconds} seconds.`);
  }
  const withinDeadline = patched(PATCHES.submissionWithinDeadline);
  // Temporal ends the retries as soon as the next one would not fit, a little before the
  // deadline itself: a transient failure then is the deadline's.
  const deadlineFirst = withinDeadline && deadline - Date.now() < SUBMISSION_MAX_MS;
  try {
    setCurrentDetails(`Submitting to the vendor (${input.upstream})`);
    const call = { taskId: input.taskId, upstream: input.upstream, request: input.request };
    // The job a cancel caught under way goes where the cancellation path looks for it.
    const whenCancelled = (made: { vendorTaskId: string } | undefined) => {
      if (made) state.vendorTaskId = made.vendorTaskId;
    };
    if (patched(PATCHES.cancelWaitsForSubmission)) {
      const submitting = withinDeadline ? submissionWithin(deadline, true) : submissionWaitingOnCancel;
      ({ vendorTaskId } = await submitWaitingThroughCancel(() => submitting.submitToVendor(call), whenCancelled));
    } else {
      const submitting = withinDeadline ? submissionWithin(deadline) : submission;
      const submit = () => submitting.submitToVendor(call);
      ({ vendorTaskId } = patched(PATCHES.cancelDuringSubmission) ? await submitThroughCancel(submit, whenCancelled) : await submit());
    }
  } catch (error) {
    if (isCancellation(error)) throw error;
    const failure = describeActivityFailure(error);
    if (deadlineFirst && failure.type !== 'VendorRejected') {
      return failed('deadline_exceeded', `The vendor could not be reached within the task's deadline of ${input.deadlineSeconds} seconds: ${failure.message}`);
    }
    if (failure.type === 'VendorRejected') return submissionRefused(failure);
    return failed('vendor_unavailable', `The vendor could not be reached: ${failure.message}`);
  }
  state.vendorTaskId = vendorTaskId;
  const markRunning = async (progress?: number) => {
    state.status = 'running';
    await bookkeeping.markTaskRunning({ taskId: input.taskId, vendorTaskId });
    if (progress !== undefined && progress > state.progress) {
      state.progress = progress;
      await bookkeeping.updateTaskProgress({ taskId: input.taskId, progress });
    }
  };
  // Queued at the vendor is still `submitted`; the first read of the vendor running it (or
  // done with it) makes it `running`.
  const runningWhenVendorRuns = patched(PATCHES.runningWhenVendorRuns);
  if (runningWhenVendorRuns) await bookkeeping.recordVendorTask({ taskId: input.taskId, vendorTaskId });
  else await markRunning();

  let interval = POLL_FIRST_MS;
  let refusals = 0;
  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      // The deadline can pass with no read since (bookkeeping retried while the worker was
      // away): the vendor may have finished meanwhile, and its clip is the caller's.
      const last = finalRead ? finishedOutcome(await readOnce(input, vendorTaskId)) : undefined;
      if (last) return last;
      await CancellationScope.nonCancellable(() => polling.cancelVendorTask({ upstream: input.upstream, vendorTaskId }).catch(() => undefined));
      return failed('deadline_exceeded', `The task did not finish within ${input.deadlineSeconds} seconds.`);
    }
    setCurrentDetails(`Vendor task ${vendorTaskId}: ${state.status === 'running' ? `running, ${state.progress} %` : 'queued'}; next read in ${Math.round(Math.min(interval, remaining) / 1000)} s, deadline at ${new Date(deadline).toISOString()}`);
    await sleep(Math.min(interval, remaining));
    interval = Math.min(Math.round(interval * 1.5), POLL_MAX_MS);

    let status;
    try {
      status = await polling.readVendorStatus({ upstream: input.upstream, vendorTaskId });
    } catch (error) {
      if (isCancellation(error)) throw error;
      // A vendor that refuses to report the task will not change its mind: a few refusals in a
      // row end it with the vendor's words rather than an hour later as deadline_exceeded.
      // Network trouble and 5xx still only end it at the deadline.
      const failure = describeActivityFailure(error);
      if (failure.type === 'VendorRejected' && patched(PATCHES.statusRefusals) && ++refusals >= MAX_STATUS_REFUSALS) {
        await CancellationScope.nonCancellable(() => polling.cancelVendorTask({ upstream: input.upstream, vendorTaskId }).catch(() => undefined));
        return failed('vendor_rejected', `The vendor would not report the task's status: ${failure.message}`);
      }
      continue;
    }
    refusals = 0;
    if (state.status === 'submitted' && (status.state === 'running' || status.state === 'succeeded')) await markRunning(status.state === 'running' ? status.progress : undefined);
    const finished = finishedOutcome(status);
    if (finished) return finished;
    if (status.state === 'running' && status.progress !== undefined && status.progress > state.progress) {
      state.progress = status.progress;
      await bookkeeping.updateTaskProgress({ taskId: input.taskId, progress: status.progress });
    }
  }
}

type VendorStatus = Awaited<ReturnType<typeof polling.readVendorStatus>>;

/** The task's outcome when the vendor is done with it; undefined while it is not (or unread). */
function finishedOutcome(status: VendorStatus | undefined): Outcome | undefined {
  if (status?.state === 'succeeded') return status.videoUrl ? { status: 'succeeded', url: status.videoUrl } : { status: 'succeeded' };
  // A history from before vendors' codes were translated holds the vendor's own as `code`.
  if (status?.state === 'failed') return failed(status.code ?? 'generation_failed', `The vendor reported a failure: ${status.reason}`, status.vendorCode);
  return undefined;
}

/** One status read whose failure is no answer (undefined); cancellation still ends the task. */
async function readOnce(input: VideoTaskWorkflowInput, vendorTaskId: string): Promise<VendorStatus | undefined> {
  try {
    return await polling.readVendorStatus({ upstream: input.upstream, vendorTaskId });
  } catch (error) {
    if (isCancellation(error)) throw error;
    return undefined;
  }
}
