import type { TaskRetention } from '../store/task-retention.ts';

// The sweeper's step that deletes tasks past TASK_RETENTION_DAYS (store/task-retention.ts). The
// sweeper runs every 30 s, and its steps one after another; finding the settled tasks reads
// every task on FerretDB (it narrows a query by strings and booleans, not by a date range), so
// the step looks once an hour, and every 5 minutes while it keeps finding full batches (a
// store's first prune may have a backlog of years: 60,000 tasks an hour then), never at every
// round, which would hold up the sweeps that close unanswered tasks and release dead processes'
// leases. Each worker keeps its own clock: two workers pruning the same task delete it once.

export const PRUNE_BATCH = 5_000;
export const PRUNE_EVERY_MS = 3_600_000;
export const BACKLOG_EVERY_MS = 300_000;
const DAY_MS = 86_400_000;

/** What the step needs of the store: store/task-retention.ts. */
export type SettledTaskDeletion = Pick<TaskRetention, 'pruneSettled'>;

export class TaskPruning {
  private nextAt = 0;

  constructor(
    private readonly retention: SettledTaskDeletion,
    private readonly retentionDays: number,
    private readonly log?: (message: string) => void,
  ) {}

  /** One round: the number of tasks deleted (0 when retention is off, or not yet due). */
  async run(now: Date): Promise<number> {
    if (this.retentionDays <= 0 || now.getTime() < this.nextAt) return 0;
    // Not due again until the hour is over, also when this round fails.
    this.nextAt = now.getTime() + PRUNE_EVERY_MS;
    const before = new Date(now.getTime() - this.retentionDays * DAY_MS);
    const { deleted, more } = await this.retention.pruneSettled(before, PRUNE_BATCH);
    if (more) this.nextAt = now.getTime() + BACKLOG_EVERY_MS;
    if (deleted > 0) this.log?.(`sweeper deleted ${deleted} tasks settled before ${before.toISOString()} (TASK_RETENTION_DAYS=${this.retentionDays})${more ? '; more next in 5 minutes' : ''}`);
    return deleted;
  }
}
