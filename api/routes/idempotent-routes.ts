import type { IdempotentRoute } from '../plugins/idempotency.ts';
import { principalOf } from '../plugins/api-key-auth.ts';
import type { TaskStore } from '../../store/tasks.ts';

// The routes that honour Idempotency-Key (api/plugins/idempotency.ts), and how long a first
// attempt may run before a retry treats it as abandoned.
export function idempotentRoutes(tasks: TaskStore): Record<string, IdempotentRoute> {
  return {
    '/v1/video/generations': {
      // A submission takes well under a second; after 30 s its process is gone.
      staleAfterMs: 30_000,
      // The record names the task id the first attempt used: if that task exists, the
      // submission went through and its answer is the same one every submission gets.
      recover: async (record, request) => {
        const task = await tasks.findForAccount(record.task_id, principalOf(request).accountId);
        return task ? { statusCode: 200, body: JSON.stringify({ task_id: task._id, status: 'submitted' }) } : null;
      },
    },
    // Image generation can take a minute upstream; nothing to recover, so a retry runs again.
    '/v1/images/generations': { staleAfterMs: 120_000 },
  };
}
