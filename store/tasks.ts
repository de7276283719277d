import type { Collection, Db, Filter } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';
import type { TaskError, TaskStatus, VideoTaskMetadata, VideoTaskWorkflowInput, WebhookAttempt } from '../core/video-task.ts';

export interface TaskDocument {
  _id: string;
  account_id: string;
  key_id: string;
  model: string;
  status: TaskStatus;
  seconds: number;
  resolution: string;
  ratio: string;
  metadata: VideoTaskMetadata;
  price_micros: number;
  progress: number;
  vendor_task_id?: string;
  /** Public download address from the vendor, when it gives one. */
  url?: string;
  /** True when the clip is only downloadable through the gateway (vendor content needs our key). */
  content_via_gateway?: boolean;
  error?: TaskError;
  request_id: string;
  /** Inserted false and never written since: a start is recorded in `task_workflow_starts`
   * (see markWorkflowStarted). True on tasks stored before that. */
  workflow_started: boolean;
  /** What the workflow was (or will be) started with, so the sweeper can start it again. */
  workflow_input: VideoTaskWorkflowInput;
  /** Whether its caller can learn its id without the submission's answer: true when the
   * submission carried an Idempotency-Key (a retry under it gets the task). An unstarted task
   * that is not (its api died before answering) is closed unbilled rather than run
   * (worker/sweeper.ts). Absent on tasks stored before this was recorded: they are run. */
  recoverable?: boolean;
  /** `stopped`: an operator terminated the workflow while it still tried (worker/terminated-runs.ts). */
  webhook?: { url: string; state: 'pending' | 'delivered' | 'gone' | 'refused' | 'exhausted' | 'stopped'; attempts: WebhookAttempt[] };
  created_at: Date;
  updated_at: Date;
}

const OPEN_STATUSES: TaskStatus[] = ['submitted', 'running'];
export const FINAL_STATUSES: TaskStatus[] = ['succeeded', 'failed'];

/** The collections that hold a record per task beside the task itself (one insert each). */
export const TASK_WORKFLOW_STARTS = 'task_workflow_starts';
export const TASK_DECISIONS = 'task_decisions';

/** Whether a stored task runs or is abandoned: decided once, by whoever inserts first. */
export type TaskDecision = 'run' | 'abandon';

/** The error of a task closed because its submission never got its answer to the caller
 * (store/abandoned-tasks.ts). */
export const ABANDONED_TASK_ERROR = 'gateway_unavailable';

/** Whether the task was closed because its submission never got its answer: its caller saw an
 * error or a dropped connection and never learnt its id. The api shows no such task (spec 3: a
 * task exists once its submission is accepted); the console does, as a refused submission. */
export function neverAnswered(task: Pick<TaskDocument, 'status' | 'error'>): boolean {
  return task.status === 'failed' && task.error?.code === ABANDONED_TASK_ERROR;
}

interface TaskDecisionRecord {
  _id: string;
  decision: TaskDecision;
  at: Date;
}

/** That a task's workflow was started: one insert per task, never an update of the task. */
interface WorkflowStart {
  _id: string;
  at: Date;
}

export class TaskStore {
  readonly collection: Collection<TaskDocument>;
  private readonly starts: Collection<WorkflowStart>;
  private readonly decisions: Collection<TaskDecisionRecord>;

  constructor(db: Db) {
    this.collection = db.collection<TaskDocument>('tasks');
    this.starts = db.collection<WorkflowStart>(TASK_WORKFLOW_STARTS);
    this.decisions = db.collection<TaskDecisionRecord>(TASK_DECISIONS);
  }

  /** Decides whether the task runs (its workflow's first step asks) or is abandoned (the api,
   * after answering its caller an error, asks): the first to ask wins, by a unique insert, and
   * the other learns the decision. Without it, an api giving up on a workflow start that went
   * through after all raced the workflow: a failed task could be charged, or left `running`. */
  async decide(taskId: string, wanted: TaskDecision): Promise<TaskDecision> {
    try {
      await this.decisions.insertOne({ _id: taskId, decision: wanted, at: new Date() });
      return wanted;
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      const decided = await this.decisionOf(taskId);
      if (!decided) throw error;
      return decided;
    }
  }

  /** Which of the tasks were decided to run (claimed for their caller, or by their workflow). */
  async claimedAmong(taskIds: string[]): Promise<Set<string>> {
    const found = await this.decisions.find({ _id: { $in: taskIds }, decision: 'run' }, { projection: { _id: 1 } }).toArray();
    return new Set(found.map((record) => record._id));
  }

  /** The decision on a task, if one was made. */
  async decisionOf(taskId: string): Promise<TaskDecision | null> {
    return (await this.decisions.findOne({ _id: taskId }))?.decision ?? null;
  }

  async insert(task: TaskDocument): Promise<void> {
    await this.collection.insertOne(task);
  }

  /** Stores the task unless one with its id is stored already (a retry under an
   * Idempotency-Key resuming the submission of a first attempt that died): that one stays, and
   * the answer is false. */
  async insertIfAbsent(task: TaskDocument): Promise<boolean> {
    const { _id, ...fields } = task;
    return (await this.collection.updateOne({ _id }, { $setOnInsert: fields }, { upsert: true })).upsertedCount === 1;
  }

  find(taskId: string): Promise<TaskDocument | null> {
    return this.collection.findOne({ _id: taskId });
  }

  /** By _id, then the owner check in code (stock FerretDB scanned for a filter with anything
   * beside _id). */
  async findForAccount(taskId: string, accountId: string): Promise<TaskDocument | null> {
    const task = await this.collection.findOne({ _id: taskId });
    return task?.account_id === accountId ? task : null;
  }

  async remove(taskId: string): Promise<void> {
    await this.collection.deleteOne({ _id: taskId });
  }

  /** Records that the task's workflow was started, so the sweeper leaves the task alone. Not on
   * the task document: FerretDB applies an update as a read-modify-write without isolation, and
   * this one (from the api or the sweeper) ran beside the worker's writes of the task's states,
   * which it could write back over: a succeeded task read `running` again (9 races in 100). */
  async markWorkflowStarted(taskId: string): Promise<void> {
    await this.starts.insertOne({ _id: taskId, at: new Date() }).catch((error: unknown) => {
      if (!isDuplicateKey(error)) throw error;
    });
  }

  async workflowStarted(taskId: string): Promise<boolean> {
    if ((await this.starts.countDocuments({ _id: taskId }, { limit: 1 })) > 0) return true;
    return (await this.find(taskId))?.workflow_started === true;
  }

  /** Notes the vendor's id for a task the vendor accepted but has not started (still
   * `submitted`: the spec's "accepted and queued"). */
  async recordVendorTask(taskId: string, vendorTaskId: string): Promise<void> {
    await this.collection.updateOne({ _id: taskId, status: 'submitted' }, { $set: { vendor_task_id: vendorTaskId, updated_at: new Date() } });
  }

  /** Moves an open task to `running` (idempotent). Final states are never touched.
   * True when this call moved the task to running (not when it already was, or is final). */
  async markRunning(taskId: string, update: { vendorTaskId: string; progress?: number }): Promise<boolean> {
    const set: Partial<TaskDocument> = { status: 'running', vendor_task_id: update.vendorTaskId, updated_at: new Date() };
    if (update.progress !== undefined) set.progress = update.progress;
    const result = await this.collection.updateOne({ _id: taskId, status: 'submitted' }, { $set: set });
    if (result.modifiedCount === 1) return true;
    // Already running (a retried activity): the vendor id may still need writing.
    await this.collection.updateOne({ _id: taskId, status: 'running' }, { $set: set });
    return false;
  }

  async updateProgress(taskId: string, progress: number): Promise<void> {
    // $max, not $set: the guard keeps progress moving up on MongoDB. FerretDB checks a guard on
    // a read and writes the whole document back (store/guarded-writes.ts): two progress writes
    // in that window can still lower it, a figure the next poll raises again.
    await this.collection.updateOne({ _id: taskId, status: 'running', progress: { $lt: progress } }, { $max: { progress }, $set: { updated_at: new Date() } });
  }

  /** Writes the final state once; a second call (a retried activity) changes nothing.
   * `changed` says whether this call was the one that wrote it. */
  async finish(
    taskId: string,
    final: { status: 'succeeded'; url?: string; contentViaGateway?: boolean } | { status: 'failed'; error: TaskError },
  ): Promise<{ task: TaskDocument | null; changed: boolean }> {
    const set: Partial<TaskDocument> = { status: final.status, updated_at: new Date() };
    if (final.status === 'succeeded') {
      set.progress = 100;
      if (final.url) set.url = final.url;
      if (final.contentViaGateway) set.content_via_gateway = true;
    } else {
      set.error = final.error;
    }
    const result = await this.collection.updateOne({ _id: taskId, status: { $in: OPEN_STATUSES } }, { $set: set });
    return { task: await this.find(taskId), changed: result.modifiedCount === 1 };
  }

  /** Ends a webhook still pending, no attempt to come: `exhausted` when its last attempt was cut
   * off before it could record itself, `stopped` when its workflow was terminated or never ran
   * (a submission never answered). False when it was not pending. */
  async endPendingWebhook(taskId: string, state: 'exhausted' | 'stopped'): Promise<boolean> {
    return (await this.collection.updateOne({ _id: taskId, 'webhook.state': 'pending' }, { $set: { 'webhook.state': state } })).modifiedCount === 1;
  }

  /** Adds the attempt and sets the webhook's state; the state it had before (undefined for a
   * task gone), so a webhook given up is counted once by whichever write gave it up. */
  async recordWebhookAttempt(taskId: string, attempt: WebhookAttempt, state: NonNullable<TaskDocument['webhook']>['state']): Promise<NonNullable<TaskDocument['webhook']>['state'] | undefined> {
    // No projection: FerretDB 1.24 refuses findAndModify's `fields` ("not implemented yet").
    const before = await this.collection.findOneAndUpdate({ _id: taskId }, { $push: { 'webhook.attempts': attempt }, $set: { 'webhook.state': state } }, { returnDocument: 'before' });
    return before?.webhook?.state;
  }

  /** The newest tasks of an account (or of one of its keys; created in a span of time), newest
   * first (ties by id), those after `after` (a task of the account) only, and whether more
   * follow; for console pages, bounded since FerretDB reads all of the account's tasks (by
   * their index) to sort them. */
  async listLatest(filter: { accountId: string; keyId?: string; limit: number; createdFrom?: Date; createdBefore?: Date; after?: TaskDocument }): Promise<{ tasks: TaskDocument[]; hasMore: boolean }> {
    const query: Filter<TaskDocument> = { account_id: filter.accountId };
    if (filter.keyId) query.key_id = filter.keyId;
    if (filter.createdFrom || filter.createdBefore) {
      query.created_at = { ...(filter.createdFrom ? { $gte: filter.createdFrom } : {}), ...(filter.createdBefore ? { $lt: filter.createdBefore } : {}) };
    }
    if (filter.after) {
      const { created_at: createdAt, _id: id } = filter.after;
      query.$or = [{ created_at: { $lt: createdAt } }, { created_at: createdAt, _id: { $lt: id } }];
    }
    const limit = Math.max(1, Math.min(filter.limit, 100));
    const found = await this.collection.find(query).sort({ created_at: -1, _id: -1 }).limit(limit + 1).toArray();
    return { tasks: found.slice(0, limit), hasMore: found.length > limit };
  }

  /** One page of an account's tasks as the api lists them (none closed unanswered:
   * neverAnswered), newest first (ties by id), those after `after` (a task of the account) only;
   * `status` narrows it, and `visibleTo` to the tasks a restricted key submitted or of the models
   * it may use (api/services/video-task-reads.ts readableBy). Whether more follow, from one extra
   * document. */
  async listPage(filter: { accountId: string; limit: number; after?: TaskDocument; status?: TaskStatus; visibleTo?: { keyId: string; models: string[] } }): Promise<{ tasks: TaskDocument[]; hasMore: boolean }> {
    const query: Filter<TaskDocument> = { account_id: filter.accountId, 'error.code': { $ne: ABANDONED_TASK_ERROR } };
    if (filter.status) query.status = filter.status;
    const either: Filter<TaskDocument>[][] = [];
    if (filter.after) {
      const { created_at: createdAt, _id: id } = filter.after;
      either.push([{ created_at: { $lt: createdAt } }, { created_at: createdAt, _id: { $lt: id } }]);
    }
    if (filter.visibleTo) either.push([{ key_id: filter.visibleTo.keyId }, { model: { $in: filter.visibleTo.models } }]);
    if (either.length > 0) query.$and = either.map((alternatives) => ({ $or: alternatives }));
    const found = await this.collection.find(query).sort({ created_at: -1, _id: -1 }).limit(filter.limit + 1).toArray();
    return { tasks: found.slice(0, filter.limit), hasMore: found.length > filter.limit };
  }

  /** Tasks whose workflow start was never confirmed (the api died between insert and start,
   * or during a close unstarted: store/abandoned-tasks.ts). Every old task still `submitted` is
   * a candidate (ids only: during a vendor outage there may be thousands), then those with a
   * recorded start are left out. */
  async findUnstarted(olderThan: Date, limit: number): Promise<TaskDocument[]> {
    // Oldest first: a round that stops early (Temporal out of reach) or hits its limit leaves
    // the newer ones, never the same old task behind an ever-changing set.
    const candidates = await this.collection.find({ workflow_started: false, status: 'submitted', created_at: { $lt: olderThan } }, { projection: { _id: 1 } }).sort({ created_at: 1, _id: 1 }).toArray();
    if (candidates.length === 0) return [];
    const ids = candidates.map((task) => task._id);
    const started = new Set((await this.starts.find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray()).map((start) => start._id));
    const unstarted = ids.filter((id) => !started.has(id)).slice(0, limit);
    if (unstarted.length === 0) return [];
    const found = new Map((await this.collection.find({ _id: { $in: unstarted } }).toArray()).map((task) => [task._id, task]));
    return unstarted.flatMap((id) => found.get(id) ?? []);
  }
}
