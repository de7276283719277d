import type { Client } from '@temporalio/client';
import type { Catalog } from '../../core/catalog.ts';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { resolveModel } from '../../core/model-access.ts';
import { microsToUsd } from '../../core/money.ts';
import { videoPriceMicros } from '../../core/pricing.ts';
import { startTaskWorkflow } from '../../core/start-task-workflow.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { validateVideoSubmission, type SubmissionInput } from '../../core/video-validation.ts';
import type { AccountStore } from '../../store/accounts.ts';
import type { Ledger } from '../../store/ledger.ts';
import type { TaskDocument, TaskStore } from '../../store/tasks.ts';
import type { Principal } from '../plugins/api-key-auth.ts';

export interface VideoTaskServiceOptions {
  catalog: Catalog;
  tasks: TaskStore;
  ledger: Ledger;
  accounts: AccountStore;
  temporal: Client;
  taskQueue: string;
  deadlineSeconds: number;
  /** Chat and image spend leases of this process, which may be sitting on the balance. */
  budgets?: { returnUnused(accountId: string): Promise<void> };
}

export class VideoTaskService {
  constructor(private readonly options: VideoTaskServiceOptions) {}

  // Order matters for crash safety: the snapshot exists before money moves (so a hold is never
  // orphaned without a task the sweeper can find), and the workflow re-applies the hold
  // idempotently, so a task started by the sweeper is still paid for exactly once.
  /** `taskId` is given under an Idempotency-Key, so a retry can find the task it created. */
  async submit(principal: Principal, body: SubmissionInput, requestId: string, taskId: string = newId('task')): Promise<{ task_id: string; status: 'submitted' }> {
    const { catalog, tasks, ledger } = this.options;
    const model = resolveModel(catalog, principal, body.model, 'video');
    const validated = validateVideoSubmission(model, body);
    const priceMicros = videoPriceMicros(model, validated.seconds, validated.resolution);
    const callbackUrl = body.metadata?.callback_url;
    const input: VideoTaskWorkflowInput = {
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

    const now = new Date();
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
      created_at: now,
      updated_at: now,
    };
    if (callbackUrl) task.webhook = { url: callbackUrl, state: 'pending', attempts: [] };
    await tasks.insert(task);

    const hold = () => ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference: taskId, operation: 'hold', amountMicros: priceMicros });
    let held = await hold();
    if (held === 'insufficient_balance' && this.options.budgets) {
      // Part of the balance may be leased to this process's chat calls without being spent.
      await this.options.budgets.returnUnused(principal.accountId);
      held = await hold();
    }
    if (held !== 'applied') {
      await tasks.remove(taskId);
      const account = await this.options.accounts.find(principal.accountId);
      throw new GatewayError(
        'insufficient_balance',
        `Insufficient balance: this task costs $${microsToUsd(priceMicros).toFixed(6)} and the account has $${microsToUsd(account?.balance_micros ?? 0).toFixed(6)} available. Add credits and retry.`,
      );
    }

    try {
      await startTaskWorkflow(this.options.temporal, this.options.taskQueue, input);
    } catch (error) {
      // Temporal is unreachable: give the money back and close the task, so a retry by the
      // caller (the usual reaction to a 503) cannot leave a twin behind.
      await ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference: taskId, operation: 'release', amountMicros: priceMicros });
      await tasks.finish(taskId, { status: 'failed', error: { code: 'gateway_unavailable', message: 'The task could not be scheduled.' } });
      await tasks.markWorkflowStarted(taskId);
      throw new GatewayError('service_unavailable', `The task queue is unavailable right now; nothing was charged. Retry with backoff. (${error instanceof Error ? error.message : 'unknown error'})`);
    }
    await tasks.markWorkflowStarted(taskId);
    return { task_id: taskId, status: 'submitted' };
  }

  async find(principal: Principal, taskId: string): Promise<TaskDocument> {
    // Another account's task is indistinguishable from a missing one.
    const task = await this.options.tasks.findForAccount(taskId, principal.accountId);
    if (!task) throw new GatewayError('task_not_found', `No video task with id '${taskId}'.`, 'task_id');
    return task;
  }
}
