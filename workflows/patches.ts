// Every patch id of the workflows, in one place: `test/workflows/replay.test.ts` reads this list
// to demand a recorded history on each side of every patch, and refuses a `patched()` call in
// workflows/ that names an id from anywhere else. An id, once in a history, never changes.

export const PATCHES = {
  /** Status reads the vendor refused three times in a row end the task (older histories polled
   * on until the deadline). */
  statusRefusals: 'end-task-on-refused-status-reads',
  /** Submission retries stop at the task's deadline. */
  submissionWithinDeadline: 'submission-within-deadline',
  /** A task reads `running` once the vendor runs it, not as soon as the vendor accepted it
   * (spec 4.1: submitted is "accepted and queued", running "in progress"). */
  runningWhenVendorRuns: 'running-when-the-vendor-runs',
  /** A submission the vendor refused keeps the vendor's code, and its moderation's refusal reads
   * content_policy_violation, as the same refusal does at generation. */
  submissionRefusalCodes: 'submission-refusal-codes',
  /** The deadline is checked before submission (no vendor task is started for a task already
   * past it), and the vendor is read once more at the deadline before the task is given up (a
   * clip finished while the worker was away is not thrown away). */
  deadlineFinalRead: 'deadline-final-read',
  /** An operator's cancel during the vendor submission waits (up to 70 s) for the job the call
   * made and cancels it. Superseded by cancelWaitsForSubmission; kept for its histories. */
  cancelDuringSubmission: 'cancel-during-submission',
  /** The deadline counts from the workflow's start, not from when a worker first ran it: tasks
   * queued through a worker outage do not get a fresh hour. */
  deadlineFromStart: 'deadline-from-start',
  /** An operator's cancel during the vendor submission stops its retries at once and waits for
   * the attempt under way (at most its 60 s), whose job is then cancelled. */
  cancelWaitsForSubmission: 'cancel-waits-for-submission',
  /** A task the sweeper started (an api crash left it unstarted) counts its deadline from its
   * submission (`submittedAt` in its input), not from the sweep a minute or more later. */
  deadlineFromSubmission: 'deadline-from-submission',
  /** Webhook attempts run on a queue of their own (core/video-task.ts webhookTaskQueue), not
   * beside the task's holds, submissions and status reads. */
  webhooksOwnQueue: 'webhooks-own-queue',
  /** A webhook given up is recorded `exhausted` by the workflow too, after the last attempt: one
   * whose last attempt was cut off (a lost worker, a store it could not read) or could not record
   * itself was left `pending` for good. */
  webhookGivenUpRecorded: 'webhook-given-up-recorded',
  /** A terminated task recorded as paid for (its run had captured the price) gets its usage
   * record too: a run stopped between its capture and that record (a worker killed inside the
   * settlement) left the key's usage without the task's spend. */
  paidCloseRecordsUsage: 'paid-close-records-usage',
  /** That task's vendor read, for the clip's link, is tried again over minutes when it fails: one
   * read failed by a vendor blip recorded a Seedance task succeeded with a link to the gateway's
   * /content, which has no clip to stream for Seedance (404), for a clip the caller paid for. */
  paidCloseRereadsVendor: 'paid-close-rereads-vendor',
  /** A webhook attempt that was itself lost (its worker killed, the store unreadable) is made
   * again in its slot after 10 s and then 1 minute, before the schedule moves on: a restart
   * had put the schedule's next delay (up to hours) between the receiver and its webhook. */
  webhookLostAttemptRepeated: 'webhook-lost-attempt-repeated',
} as const;
