import type { Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { Catalog } from '../../core/catalog.ts';
import { unavailableDependency } from '../../core/dependency-errors.ts';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { resolveModel } from '../../core/model-access.ts';
import { videoPriceMicros } from '../../core/pricing.ts';
import type { HostNameCheck } from '../../core/host-names.ts';
import type { Allowlist } from '../../core/outbound-guard.ts';
import { startTaskWorkflow } from '../../core/start-task-workflow.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { validateVideoSubmission, type SubmissionInput } from '../../core/video-validation.ts';
import type { AccountStore } from '../../store/accounts.ts';
import type { Ledger } from '../../store/ledger.ts';
import { closeAbandonedTask } from '../../store/abandoned-tasks.ts';
import type { TaskDocument, TaskStore } from '../../store/tasks.ts';
import type { Principal } from '../plugins/api-key-auth.ts';
import { outcomeUnknown } from '../plugins/idempotency.ts';
import { HoldAdmission, RETRY_AFTER_SECONDS } from './hold-admission.ts';
import { refusedAddressIn } from './submission-addresses.ts';
import type { AccountBudgets } from './billing/account-budgets.ts';
import { holdTaskPrice } from './task-price-hold.ts';

export interface VideoTaskServiceOptions {
  catalog: Catalog;
  tasks: TaskStore;
  ledger: Ledger;
  accounts: AccountStore;
  temporal: Client;
  taskQueue: string;
  deadlineSeconds: number;
  /** The worker's OUTBOUND_ALLOWLIST: a callback URL whose address (literal, or its name's) it
   * would refuse is refused at submission, not accepted and then never delivered; so is a
   * reference media URL on such an address. */
  outboundAllowlist: Allowlist;
  /** Judges those URLs' names by their addresses. */
  hostNames: HostNameCheck;
  /** Chat and image spend leases of this process, which may be sitting on the balance. */
  budgets?: Pick<AccountBudgets, 'takeWithLeasesBack'>;
  log?: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
  /** Tests shorten HOLD_DEADLINE_MS and STALLED_AFTER_MS. */
  holdDeadlineMs?: number;
  stalledAfterMs?: number;
}

/** The log of a service built without one (tests). */
const QUIET = { info: () => {}, warn: () => {} };

/** How long a submission waits for Temporal to accept its workflow before answering 503. */
const START_DEADLINE_MS = 3_000;
/** How long a submission waits to be stored and to get its hold on the balance before answering
 * 503. Generous: a burst of 50 submissions of one account that mostly end in 403 (each refusal
 * costs a dozen store round trips, queued per account) takes about 3.5 s here when all is well. */
const HOLD_DEADLINE_MS = 8_000;
/** An account's queue of submissions waiting for their hold counts as stalled once none got its
 * hold for this long; new ones are then refused at once (a hold takes tens of ms when all is well). */
const STALLED_AFTER_MS = 2_000;
/** How long a submission that failed halfway keeps trying to close its task (the store may be
 * down); its backoff between attempts. */
const ABANDON_FOR_MS = 10 * 60_000;
const ABANDON_RETRY_MS = [1_000, 2_000, 4_000, 8_000, 15_000];

function within<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

const settledOk = () => undefined;

export class VideoTaskService {
  private readonly admission: HoldAdmission;

  constructor(private readonly options: VideoTaskServiceOptions) {
    this.admission = new HoldAdmission({ stalledAfterMs: options.stalledAfterMs ?? STALLED_AFTER_MS, deadlineMs: options.holdDeadlineMs ?? HOLD_DEADLINE_MS });
  }

  /** Throws the 503 a submission of the account would get at once from its hold queue now
   * (hold-admission.ts), without joining it: for the Idempotency-Key claim, which is two store
   * writes wasted on a refusal. A body that submit() would refuse as invalid (for the model,
   * the key) gets that answer instead, as without a key: a retry with backoff would not help. */
  refuseIfQueueHopeless(principal: Principal, body: SubmissionInput): void {
    try {
      this.admission.check(principal.accountId);
    } catch (refusal) {
      const model = resolveModel(this.options.catalog, principal, body.model, 'video');
      validateVideoSubmission(model, body, this.options.catalog.upstream(model.upstream).protocol);
      throw refusal;
    }
  }

  // Order matters for crash safety: the snapshot exists before money moves (so a hold is never
  // orphaned without a task the sweeper can find and close), and the workflow re-applies the
  // hold idempotently, so a task resumed by a retry under its key is still paid for exactly once.
  /** `idempotentTaskId` is given under an Idempotency-Key, so a retry can find the task it created. */
  async submit(principal: Principal, body: SubmissionInput, requestId: string, idempotentTaskId?: string): Promise<{ task_id: string; status: 'submitted' }> {
    const taskId = idempotentTaskId ?? newId('task');
    const { catalog, tasks, ledger } = this.options;
    const model = resolveModel(catalog, principal, body.model, 'video');
    const validated = validateVideoSubmission(model, body, catalog.upstream(model.upstream).protocol);
    let priceMicros = videoPriceMicros(model, validated.seconds, validated.resolution);
    const callbackUrl = body.metadata?.callback_url;
    const refusal = await refusedAddressIn(body, this.options.outboundAllowlist, this.options.hostNames, this.options.log ?? QUIET, requestId);
    // A retry under an Idempotency-Key whose task is stored goes on with that task as stored
    // (below), whatever this process would say of it now: its first attempt was let through (by
    // an older version, an api given another allowlist, or a name that resolved elsewhere then),
    // and its workflow may already run.
    if (refusal && (idempotentTaskId === undefined || !(await tasks.find(taskId)))) throw refusal;
    const now = new Date();
    let input: VideoTaskWorkflowInput = {
      taskId,
      accountId: principal.accountId,
      keyId: principal.keyId,
      modelId: model.id,
      upstream: model.upstream,
      request: validated.request,
      holdMicros: priceMicros,
      deadlineSeconds: this.options.deadlineSeconds,
      requestId,
    };
    if (callbackUrl) input.callbackUrl = callbackUrl;

    const task: TaskDocument = {
      _id: taskId,
      account_id: principal.accountId,
      key_id: principal.keyId,
      model: model.id,
      status: 'submitted',
      seconds: validated.seconds,
      resolution: validated.resolution,
      ratio: validated.ratio,
      metadata: body.metadata ?? {},
      price_micros: priceMicros,
      progress: 0,
      request_id: requestId,
      workflow_started: false,
      workflow_input: input,
      recoverable: idempotentTaskId !== undefined,
      created_at: now,
      updated_at: now,
    };
    if (callbackUrl) task.webhook = { url: callbackUrl, state: 'pending', attempts: [] };

    // The hold waits behind the account's other ledger movements (store/ledger.ts queues them per
    // process, chat's spend leases included). When the store is slow, that queue outgrows any
    // caller's patience. So: a submission that does not get its hold in time is answered 503
    // (nothing charged), and one that could not get it in time, the queue being stalled or too
    // long, is refused at once instead of lengthening the queue (hold-admission.ts).
    const leaveQueue = this.admission.join(principal.accountId);
    // Set when the caller is answered the deadline's 503: a hold still queued then is withdrawn
    // when its turn comes. Applied and released, it put two more movements in the very queue
    // that made the caller wait, and under a burst each such 503 made the next ones likelier (a
    // chaos review: 0 to 8 acceptances a second for minutes, 1.5 closed tasks per submission).
    let answered503 = false;
    const storing = (async (): Promise<'held' | 'withdrawn'> => {
      // Under an Idempotency-Key the task may be stored already, by a first attempt whose
      // process died before it held the price and started the workflow (api/routes/idempotent-routes.ts).
      if (idempotentTaskId === undefined) await tasks.insert(task);
      else if (!(await tasks.insertIfAbsent(task))) {
        // It goes on as it was stored: its price and input, not this retry's (the catalog's
        // price may have changed since, and its hold, if placed, is of the stored price).
        const stored = await tasks.find(taskId);
        if (stored) ({ workflow_input: input, price_micros: priceMicros } = stored);
      }
      return holdTaskPrice(this.options, principal, taskId, priceMicros, () => !answered503);
    })();
    storing.then(
      (hold) => leaveQueue(Date.now(), hold === 'withdrawn'),
      () => leaveQueue(),
    );
    try {
      await within(storing, this.options.holdDeadlineMs ?? HOLD_DEADLINE_MS, () => {
        answered503 = true;
        return new GatewayError('service_unavailable', 'The balance could not be reserved in time; nothing was charged. Retry with backoff.', undefined, { 'retry-after': RETRY_AFTER_SECONDS });
      });
    } catch (error) {
      // The caller gets an error (a 503 when the store went away or is too slow), yet the task
      // may be stored, even held, or about to be: left as it is, it held the caller's money for
      // the sweeper's minute. Closed in the background once its hold has settled.
      // `input` read once storing is over: a resumed submission switches to the stored task's.
      const why = answered503 ? 'Its balance could not be reserved in time, so its submission was answered 503.' : 'Its submission failed partway: the store failed or was too slow.';
      if (!(error instanceof GatewayError && error.code === 'insufficient_balance')) void storing.then(settledOk, settledOk).then(() => this.abandon(input, `${why} It never ran, and nothing was charged.`));
      throw error;
    }

    try {
      // A deadline, so an unreachable Temporal means a quick 503 rather than the client's
      // retries (about 20 s) and a caller who gave up long before.
      await this.options.temporal.connection.withDeadline(Date.now() + START_DEADLINE_MS, () => startTaskWorkflow(this.options.temporal, this.options.taskQueue, input));
    } catch (error) {
      // Temporal is unreachable: give the money back and close the task, so a retry by the
      // caller (the usual reaction to a 503) cannot leave a twin behind.
      // In an outage, one short line at info: it refuses every submission, a trace each buried
      // the log, and the 503's own warning (error-handler.ts) already says Temporal is away.
      // Anything else (a bug, a refusal by Temporal) keeps its trace.
      if (unavailableDependency(error)) this.options.log?.info({ taskId, reason: error instanceof Error ? error.message : String(error) }, 'workflow start failed; the task is closed unbilled');
      else this.options.log?.error({ err: error, taskId }, 'workflow start failed; the task is closed unbilled');
      const closing = this.abandon(input, 'The task could not be scheduled.');
      // Rarely the start went through all the same (Temporal recorded it as the deadline passed).
      // A task without an Idempotency-Key then waits for its caller's claim, which the close has
      // denied it: nothing runs. One with a key is claimed by its workflow at once
      // (activities/billing.ts), so the close may find it running: its caller then gets it.
      // Answered 503, the caller would retry under the key, whose record an error answer lets
      // go, and get (and pay for) a second task.
      const outcome = idempotentTaskId === undefined ? 'closed' : await closing;
      if (outcome === 'runs') {
        await tasks.markWorkflowStarted(taskId).catch((markError: unknown) => this.options.log?.warn({ err: markError, taskId }, 'could not mark the workflow started'));
        return { task_id: taskId, status: 'submitted' };
      }
      // With Temporal's error as their cause, the error handler logs these as an outage of Temporal.
      if (outcome === 'unsettled') {
        // The store did not take the close: the task may yet run. The key's record stays in
        // flight, so a retry under the key finds this task (idempotent-routes.ts recover) instead
        // of making a twin.
        throw Object.assign(
          outcomeUnknown(new GatewayError('service_unavailable', 'The task queue is unavailable right now, and whether this task was started could not be checked: it is billed only if it runs. Retry under the same Idempotency-Key, with backoff: the retry answers with this task if it runs.')),
          { cause: error },
        );
      }
      throw Object.assign(new GatewayError('service_unavailable', 'The task queue is unavailable right now; nothing was charged. Retry with backoff.'), { cause: error });
    }
    // The workflow runs, so the caller gets its task even if this flag cannot be written now: the
    // sweeper then finds the workflow and writes the flag itself.
    const [decision] = await Promise.all([
      this.claimForCaller(input, task.recoverable === true),
      tasks.markWorkflowStarted(taskId).catch((error: unknown) => this.options.log?.warn({ err: error, taskId }, 'could not mark the workflow started')),
    ]);
    if (decision === 'abandon') {
      throw new GatewayError('service_unavailable', 'This submission took too long inside the gateway and was closed unstarted; nothing was charged. Retry with backoff.');
    }
    if (decision === 'unknown') {
      // Its money comes back now, not when the workflow gives up on the claim a minute later: a
      // caller funded for one task would get a 403 on the retry. The abandon loses to a claim
      // that did reach the store (the task then runs; the message says so).
      void this.abandon(input, 'The task could not be confirmed to its caller.');
      throw new GatewayError('service_unavailable', 'The task could not be confirmed; nothing was charged, unless it was confirmed after all (it then runs and is billed as usual). Retry with backoff.');
    }
    return { task_id: taskId, status: 'submitted' };
  }

  /**
   * Claims the task for running, the last step before its id goes to the caller: the workflow
   * runs a task without an Idempotency-Key only once this claim is on record, so a process that
   * dies before answering leaves a task that is closed unbilled (activities/billing.ts). A task
   * closed as unanswered first (this process stalled past the grace: the sweeper or its workflow
   * closed it) has lost the claim: answering 200 would hand out a task that is already `failed`.
   * A claim the store cannot record ('unknown') is a 503 for a task without a key, which its
   * workflow then closes; with a key, the workflow makes the claim itself and the caller's
   * retry under the key finds the task, so the caller gets it.
   */
  private async claimForCaller(input: VideoTaskWorkflowInput, recoverable: boolean): Promise<'run' | 'abandon' | 'unknown'> {
    try {
      return await this.options.tasks.decide(input.taskId, 'run');
    } catch (error) {
      // The insert may have reached the store with its answer lost: what is on record decides.
      const recorded = await this.options.tasks.decisionOf(input.taskId).catch(() => null);
      if (recorded) return recorded;
      this.options.log?.warn({ err: error, taskId: input.taskId }, recoverable ? 'could not claim the task for its caller; its workflow will' : 'could not claim the task for its caller; it is not answered, and its workflow closes it');
      return recoverable ? 'run' : 'unknown';
    }
  }

  /**
   * Closes a task whose submission failed after it was stored: final state `failed` first, then
   * the hold (if it was placed) released, then the sweeper told to leave it. The workflow checks
   * the snapshot after its own hold (activities/billing.ts), so even a workflow that did start
   * bills nothing. Says what its first attempt found: 'closed', 'runs' (the workflow started
   * after all and claimed the task first), or 'unsettled' when the store failed it; failed
   * attempts are then retried in the background (the store may be down) for up to ABANDON_FOR_MS.
   */
  private async abandon(input: VideoTaskWorkflowInput, message: string): Promise<'closed' | 'runs' | 'unsettled'> {
    const attempt = async () => {
      // The workflow may have started after all and claimed the task first: it runs to its end
      // and is billed as any task is; closing it now would fight the worker over its state.
      const outcome = await closeAbandonedTask(this.options, input, message);
      if (outcome === 'runs') this.options.log?.warn({ taskId: input.taskId }, 'an abandoned submission had started after all; its task runs');
      return outcome;
    };
    const giveUpAt = Date.now() + ABANDON_FOR_MS;
    const retry = (failures: number) => {
      const timer = setTimeout(() => {
        attempt().catch((error: unknown) => {
          if (Date.now() < giveUpAt) return retry(failures + 1);
          this.options.log?.error({ err: error, taskId: input.taskId }, 'gave up closing an abandoned task; the sweeper closes it');
        });
      }, ABANDON_RETRY_MS[Math.min(failures, ABANDON_RETRY_MS.length - 1)]);
      timer.unref();
    };
    return attempt().catch((error: unknown) => {
      this.options.log?.warn({ err: error, taskId: input.taskId }, 'could not close an abandoned task yet; retrying in the background');
      retry(0);
      return 'unsettled' as const;
    });
  }
}
