import type { IdempotentRoute } from '../plugins/idempotency.ts';
import { principalOf } from '../plugins/api-key-auth.ts';
import type { TaskStore } from '../../store/tasks.ts';
import type { SubmissionInput } from '../../core/video-validation.ts';
import type { VideoTaskService } from '../services/video-tasks.ts';
import { neverAnswered } from '../../store/tasks.ts';

// The routes that honour Idempotency-Key (api/plugins/idempotency.ts), and how long after its
// last refresh (every 10 s while it runs) a first attempt counts as abandoned: its process died.
export function idempotentRoutes(tasks: TaskStore, videoTasks?: Pick<VideoTaskService, 'refuseIfQueueHopeless'>): Record<string, IdempotentRoute> {
  return {
    '/v1/video/generations': {
      staleAfterMs: 30_000,
      ...(videoTasks ? { refuseBeforeClaim: (request) => videoTasks.refuseIfQueueHopeless(principalOf(request), request.body as SubmissionInput) } : {}),
      // The record names the task id the first attempt used: if that task exists, the
      // submission went through and its answer is the same one every submission gets. Unless
      // it was closed unbilled (video-tasks.ts abandon(): the first attempt answered 503, and
      // its refusal stayed recorded because the store was down): that id is spent, and the
      // retry submits anew under another, so it gets a task that runs and calls back.
      recover: async (record, request) => {
        const task = await tasks.findForAccount(record.task_id, principalOf(request).accountId);
        if (!task) return { rerun: 'same-task' };
        if (neverAnswered(task)) return { rerun: 'new-task' };
        // Stored, never started: the first attempt died between storing the task and starting
        // its workflow (or before marking it started). The submission goes on under the same id
        // (each step is idempotent), so the price is held and the balance checked now, a 403
        // if it no longer covers the task, instead of a 200 for a task the sweeper would close
        // unstarted a minute later.
        if (task.status === 'submitted' && !(await tasks.workflowStarted(task._id))) return { rerun: 'same-task' };
        return { replay: { statusCode: 200, body: JSON.stringify({ task_id: task._id, status: 'submitted' }) } };
      },
    },
    // However long the upstream takes, a running call is refreshed; nothing to recover, so a
    // retry of an abandoned one runs again.
    '/v1/images/generations': { staleAfterMs: 30_000 },
  };
}
