// Types shared by the api, the workflow and the activities. This file must stay free of
// runtime imports: the workflow bundle imports it, and workflows may not touch Node built-ins.
import type { ReferenceMedia, VideoGenerationRequest } from '../vendors/types.ts';

export type TaskStatus = 'submitted' | 'running' | 'succeeded' | 'failed';

export interface TaskError {
  code: string;
  message: string;
  /** The vendor's own code for a failure it reported, beside the gateway's `code`. */
  vendor_code?: string;
}

/** What the caller sent in `metadata`, echoed back on the task. */
export interface VideoTaskMetadata {
  ratio?: string;
  resolution?: string;
  generate_audio?: boolean;
  callback_url?: string;
  content?: Array<{ type: ReferenceMedia['type']; role: string } & Record<string, unknown>>;
}

export interface VideoTaskWorkflowInput {
  taskId: string;
  accountId: string;
  keyId: string;
  modelId: string;
  /** Catalog upstream name; the worker resolves its address and secret itself, so no secret enters the history. */
  upstream: string;
  request: VideoGenerationRequest;
  holdMicros: number;
  callbackUrl?: string;
  /** How long the task may take before it fails (and its vendor task is cancelled), counted
   * from `submittedAt`. */
  deadlineSeconds: number;
  /** When the api stored the task (epoch ms). Set by sweepers before stop 53, which started a
   * task's workflow a minute or more after its submission (from the task's `created_at`);
   * histories of such runs still carry it. The api's own start, a retry's resume included, is
   * the submission: it leaves this out, so its clock's skew against Temporal's never shortens a
   * deadline. */
  submittedAt?: number;
  requestId: string;
}

/** What closeTerminatedTaskWorkflow needs: the task's own input, as stored, and the vendor task
 * its terminated run started (from the task, or that run's history), if any. */
export interface CloseTerminatedTaskInput {
  task: VideoTaskWorkflowInput;
  vendorTaskId?: string;
}

export interface VideoTaskWorkflowResult {
  status: 'succeeded' | 'failed';
  url?: string;
  error?: TaskError;
  webhook?: 'delivered' | 'gone' | 'refused' | 'exhausted';
}

export interface WebhookAttempt {
  attempt: number;
  at: Date;
  outcome: 'delivered' | 'retry' | 'gone' | 'refused';
  status?: number;
  error?: string;
  duration_ms: number;
}

/** How long a submission's api has to claim its task for its caller (just before it answers):
 * past it, a task whose caller cannot find it again (no Idempotency-Key) is closed unbilled, by
 * the sweeper when its workflow never started (worker/sweeper.ts: since the task was stored), by
 * its workflow when it did (activities/billing.ts holdFunds: since its first step was scheduled). */
export const UNANSWERED_SUBMISSION_GRACE_MS = 60_000;

/** The published webhook retry schedule: the delay before each attempt, in seconds. */
export const WEBHOOK_RETRY_SCHEDULE_SECONDS = [0, 5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 14 * 3600, 20 * 3600, 24 * 3600];

/** The queue a task's webhook attempts run on, beside the task queue whose workflows send them:
 * every worker serves both, with slots of its own for each (worker/create-worker.ts). */
export function webhookTaskQueue(taskQueue: string): string {
  return `${taskQueue}-webhooks`;
}

/** Temporal's longest fairness key, in bytes. */
const MAX_FAIRNESS_KEY_BYTES = 64;

/** The Temporal priority a task's workflow starts with, which its activities (holds, vendor
 * calls, webhook attempts) inherit: the account is the fairness key, so when a queue has a
 * backlog Temporal hands out its tasks to the accounts in turn rather than first come, first
 * served. An account that submits thousands of tasks at once, or whose receiver answers every
 * webhook slowly, then delays another account's next task by a turn, not by its whole backlog.
 * It needs `matching.enableFairness` on the Temporal server (README, Configuration); a server
 * without it ignores the key. Account ids are ASCII (a character a byte) and far shorter than
 * the limit; a longer one is cut to it rather than failing the start. */
export function taskPriority(accountId: string): { fairnessKey: string } {
  return { fairnessKey: accountId.slice(0, MAX_FAIRNESS_KEY_BYTES) };
}

/** How long a stopping worker lets its activities run: past the longest one's timeout (a vendor
 * submission 60 s, a webhook attempt 45 s). Docker Compose's stop_grace_period for the worker
 * and `npm start` allow a little more before they kill it. */
export const WORKER_STOP_MS = 75_000;
