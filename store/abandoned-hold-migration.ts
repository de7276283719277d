import type { Db } from 'mongodb';
import { unavailableDependency } from '../core/dependency-errors.ts';
import { Ledger } from './ledger.ts';
import { migrateOnce } from './migrations.ts';
import { ABANDONED_TASK_ERROR, type TaskDocument } from './tasks.ts';

// Until stop 48 an abandoned task was written `failed` before its hold was released, so a close
// cut between the two (a kill, or the store closing under an api at a shutdown) kept the hold
// for good: the sweeper only looks at `submitted` tasks (a chaos review found $1.36 over 7
// tasks). store/abandoned-tasks.ts now releases first. The first process of a version with this
// migration releases the holds that the old order left, once per store.
//
// Safe to run twice and beside running tasks: such a task was never started, or its workflow
// found it abandoned and held nothing; a release shares its ledger slot with a capture, so an
// already settled hold moves nothing.

export async function releaseHoldsOfAbandonedTasks(db: Db): Promise<void> {
  await migrateOnce(db, 'abandoned-task-holds-released', async () => {
    const ledger = new Ledger(db);
    const tasks = db.collection<TaskDocument>('tasks');
    const closed = tasks.find({ status: 'failed', 'error.code': ABANDONED_TASK_ERROR }, { projection: { workflow_input: 1 } });
    for await (const { workflow_input: input } of closed) {
      // A document without its input (written by hand, say) must not keep every process from
      // starting: it has nothing this migration could release by.
      if (!input?.accountId || !input.taskId || !(input.holdMicros > 0)) continue;
      try {
        if (!(await ledger.find(input.accountId, input.taskId, 'hold'))) continue;
        await ledger.apply({ accountId: input.accountId, keyId: input.keyId, reference: input.taskId, operation: 'release', amountMicros: input.holdMicros });
      } catch (error) {
        // The store failing is every document's problem: the start is retried. A ledger that
        // refuses this one release (a bug, bad data) must not stop every process from starting.
        if (unavailableDependency(error) === 'store') throw error;
        console.warn(`[framegate] could not release the hold of abandoned task ${input.taskId}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  });
}
