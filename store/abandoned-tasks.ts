import type { VideoTaskWorkflowInput } from '../core/video-task.ts';
import type { Ledger } from './ledger.ts';
import { ABANDONED_TASK_ERROR, type TaskStore } from './tasks.ts';

// A stored video task whose submission never got its answer to the caller: the api answered an
// error (the store or Temporal failed it halfway: api/services/video-tasks.ts), or died before
// answering (the worker's sweeper finds the task unstarted: worker/sweeper.ts). Its caller
// cannot know it exists, so it must neither run nor cost anything. It is closed `failed` with
// its hold released, unless its workflow started after all and claimed it first
// (TaskStore.decide): then it runs and is billed as any task is. The api shows no task so
// closed (neverAnswered in store/tasks.ts).

/** Closes the task unless its workflow claimed it: 'closed', or 'runs'. Safe to retry. */
export async function closeAbandonedTask(stores: { tasks: TaskStore; ledger: Ledger }, input: VideoTaskWorkflowInput, message: string): Promise<'closed' | 'runs'> {
  const { tasks, ledger } = stores;
  if ((await tasks.decide(input.taskId, 'abandon')) === 'run') return 'runs';
  // The money first, while the task still reads `submitted`: a close cut short (a kill, or the
  // store closing under an api at a shutdown) then leaves a task the sweeper finds and closes
  // again (worker/sweeper.ts). Written `failed` first, a cut left its hold held for good, the
  // sweeper looking only at `submitted` tasks (a chaos review: $1.36 over 7 tasks).
  if (await ledger.find(input.accountId, input.taskId, 'hold')) {
    await ledger.apply({ accountId: input.accountId, keyId: input.keyId, reference: input.taskId, operation: 'release', amountMicros: input.holdMicros });
  }
  await tasks.finish(input.taskId, { status: 'failed', error: { code: ABANDONED_TASK_ERROR, message } });
  // No workflow sends its webhook (nobody knows the task to expect one): it would read
  // `pending` for good, promising an attempt that never comes.
  await tasks.endPendingWebhook(input.taskId, 'stopped');
  await tasks.markWorkflowStarted(input.taskId);
  return 'closed';
}
