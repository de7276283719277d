import type { Collection, Db, Filter } from 'mongodb';
import { FINAL_STATUSES, TASK_DECISIONS, TASK_WORKFLOW_STARTS, type TaskDocument } from './tasks.ts';

// Tasks past the operator's retention (TASK_RETENTION_DAYS), deleted with the records kept beside
// each (its workflow start, its run-or-abandon decision): FerretDB has no TTL indexes, and a TTL
// index could not tell whether a task's webhook is still tried. Only tasks that nothing writes
// any more: final, last written before the cut, and with no webhook still being tried (a
// webhook's retries run for days after the task finished, and each attempt is recorded on it).
// The money stays: the ledger's entries and the usage records (the console's spend per key) are
// never deleted here.
//
// The records beside a task go before the task itself: a prune cut short then leaves a final
// task without them, which the next prune finds again. (The other way round it would leave them
// for ever, with nothing left to find them by.) A final task without its start record is
// nothing to the sweeper, which looks only at tasks still `submitted`.

/** Whether nothing will write the task again, by the time `before`. A webhook given up or
 * delivered was last written at its last attempt, which may be days after the task's final
 * write: such a task stays until that attempt is as old as the cut. */
function settledBefore(before: Date): Filter<TaskDocument> {
  // $nor, not $not: FerretDB 1.24 reads `{'webhook.attempts.at': {$not: {$gte: …}}}` as "some
  // attempt before", MongoDB as "no attempt since" (test/store/task-retention.test.ts).
  return { status: { $in: FINAL_STATUSES }, updated_at: { $lt: before }, 'webhook.state': { $ne: 'pending' }, $nor: [{ 'webhook.attempts.at': { $gte: before } }] };
}

export class TaskRetention {
  private readonly tasks: Collection<TaskDocument>;
  private readonly beside: Collection<{ _id: string }>[];

  constructor(db: Db) {
    this.tasks = db.collection<TaskDocument>('tasks');
    this.beside = [TASK_WORKFLOW_STARTS, TASK_DECISIONS].map((name) => db.collection<{ _id: string }>(name));
  }

  /** Deletes up to `limit` tasks settled before `before` (see above), with their records:
   * how many it deleted, and whether more may be left (it found `limit`). */
  async pruneSettled(before: Date, limit: number): Promise<{ deleted: number; more: boolean }> {
    const ids = (await this.tasks.find(settledBefore(before), { projection: { _id: 1 }, limit }).toArray()).map((task) => task._id);
    if (ids.length === 0) return { deleted: 0, more: false };
    for (const records of this.beside) await records.deleteMany({ _id: { $in: ids } });
    // The filter again, in case a task was written since it was read (nothing writes a settled
    // task): such a task would stay, without its records, which only an unstarted task needs.
    const { deletedCount } = await this.tasks.deleteMany({ _id: { $in: ids }, ...settledBefore(before) });
    return { deleted: deletedCount, more: ids.length === limit };
  }
}
