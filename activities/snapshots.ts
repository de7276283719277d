import { videoTaskTransitions } from '../core/metrics.ts';
import type { TaskError } from '../core/video-task.ts';
import type { TaskStore } from '../store/tasks.ts';

// Snapshot writes: the MongoDB copy of the workflow's state that GET reads. Every write is
// conditional on the task still being open, so a final state never changes.

export function createSnapshotActivities(deps: { tasks: TaskStore }) {
  return {
    async markTaskRunning(input: { taskId: string; vendorTaskId: string }): Promise<void> {
      const changed = await deps.tasks.markRunning(input.taskId, { vendorTaskId: input.vendorTaskId });
      // Counted once per task: a retried activity finds the task already running.
      if (changed) {
        const task = await deps.tasks.find(input.taskId);
        if (task) videoTaskTransitions.inc({ state: 'running', model: task.model });
      }
    },

    async recordVendorTask(input: { taskId: string; vendorTaskId: string }): Promise<void> {
      await deps.tasks.recordVendorTask(input.taskId, input.vendorTaskId);
    },

    async updateTaskProgress(input: { taskId: string; progress: number }): Promise<void> {
      await deps.tasks.updateProgress(input.taskId, Math.max(0, Math.min(99, Math.round(input.progress))));
    },

    async finishTask(input: { taskId: string; outcome: { status: 'succeeded'; url?: string } | { status: 'failed'; error: TaskError } }): Promise<void> {
      const outcome = input.outcome;
      const { task, changed } = await deps.tasks.finish(
        input.taskId,
        outcome.status === 'succeeded' ? { status: 'succeeded', url: outcome.url, contentViaGateway: !outcome.url } : outcome,
      );
      if (!task) throw new Error(`task ${input.taskId} has no snapshot`);
      if (changed) videoTaskTransitions.inc({ state: task.status, model: task.model });
    },
  };
}
