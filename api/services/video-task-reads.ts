import { quotedId } from '../../core/characters.ts';
import { GatewayError } from '../../core/errors.ts';
import { mayUseModel } from '../../core/model-access.ts';
import type { TaskStatus } from '../../core/video-task.ts';
import { neverAnswered, type TaskDocument, type TaskStore } from '../../store/tasks.ts';
import type { Principal } from '../plugins/api-key-auth.ts';

/** Longer than any task id the gateway makes (task_ and 16 characters). */
const MAX_TASK_ID_LENGTH = 100;

/** The api's reads of video tasks (GET one, the listing): which of the account's tasks a key
 * sees, and the 404 and 403 it gets for the others. Submissions are video-tasks.ts. */
export class VideoTaskReads {
  constructor(private readonly tasks: TaskStore) {}

  /** A page of the caller's account's tasks that its key may read (readableBy), newest first;
   * `after` is the last task_id of the page before (a 404 when the account has no such task). */
  async list(principal: Principal, page: { limit: number; after?: string; status?: TaskStatus }): Promise<{ tasks: TaskDocument[]; hasMore: boolean }> {
    let after: TaskDocument | undefined;
    if (page.after !== undefined) {
      const task = await this.shownTask(page.after, principal.accountId);
      // A task this key may not read is no cursor for it either (never listed to it).
      if (!task || !readableBy(principal, task)) throw new GatewayError('task_not_found', `No video task with id ${quotedId(page.after)} to list after.`, 'after');
      after = task;
    }
    const visibleTo = principal.models === null ? undefined : { keyId: principal.keyId, models: principal.models };
    // Pages read on past tasks not shown yet (unclaimed: see shownTask), so that a page is short
    // only at the end.
    const shown: TaskDocument[] = [];
    for (;;) {
      const read = await this.tasks.listPage({ accountId: principal.accountId, limit: page.limit - shown.length, after, status: page.status, ...(visibleTo ? { visibleTo } : {}) });
      const unclaimed = await this.unclaimed(read.tasks);
      shown.push(...read.tasks.filter((task) => !unclaimed.has(task._id)));
      after = read.tasks.at(-1);
      if (shown.length >= page.limit || !read.hasMore || after === undefined) return { tasks: shown, hasMore: read.hasMore };
    }
  }

  /** The ids among `tasks` that no caller has been answered yet: a task stored without an
   * Idempotency-Key runs, and is shown, only once its api claimed it for its caller, the last step
   * before answering (store/tasks.ts decide). One whose api died before that is closed unbilled a
   * minute later (worker/sweeper.ts, activities/billing.ts); until then it read `submitted`, was
   * listed, and then vanished (404), and its hold showed as held (a crash review). */
  private async unclaimed(tasks: TaskDocument[]): Promise<Set<string>> {
    const waiting = tasks.filter((task) => task.status === 'submitted' && task.recoverable === false).map((task) => task._id);
    if (waiting.length === 0) return new Set();
    const claimed = await this.tasks.claimedAmong(waiting);
    return new Set(waiting.filter((id) => !claimed.has(id)));
  }

  /** The account's task as the api shows it, or null. Another account's task is
   * indistinguishable from a missing one; so is an id no task can have (spec 7: an unknown
   * task_id is a 404), which needs no store read, and a task closed because its submission never
   * got its answer: to its caller that submission was refused (spec 3: a task exists once its
   * submission is accepted), and it is never listed. Nor is one still waiting for that answer
   * (unclaimed), whose caller does not know it yet and may never. */
  private async shownTask(taskId: string, accountId: string): Promise<TaskDocument | null> {
    if (taskId === '' || taskId.length > MAX_TASK_ID_LENGTH) return null;
    const task = await this.tasks.findForAccount(taskId, accountId);
    if (!task || neverAnswered(task)) return null;
    return (await this.unclaimed([task])).size === 0 ? task : null;
  }

  async find(principal: Principal, taskId: string): Promise<TaskDocument> {
    const task = await this.shownTask(taskId, principal.accountId);
    if (!task) {
      // `/v1/video/generations/` (a trailing slash): no id at all, rather than an id nobody has.
      const what = taskId === '' ? 'No task id in the path: GET /v1/video/generations/{task_id} reads a task, GET /v1/video/generations lists them.' : `No video task with id ${quotedId(taskId)}.`;
      throw new GatewayError('task_not_found', what, 'task_id');
    }
    if (!readableBy(principal, task)) {
      throw new GatewayError('model_not_allowed', `This API key may not use the model ${quotedId(task.model)}: it reads the tasks it submitted, and its account's tasks of the models it may use. Another key of the account submitted this one.`, 'task_id');
    }
    return task;
  }
}

/** A key reads the tasks it submitted (whatever its models became since) and its account's
 * tasks of the models it may use: a key given out for one model does not read the clips, prompts
 * and webhook history of the account's other models (spec 5: a model a key lacks is a 403). */
export function readableBy(principal: Principal, task: TaskDocument): boolean {
  return task.key_id === principal.keyId || mayUseModel(principal, task.model);
}
