import { ApplicationFailure } from '@temporalio/activity';
import { spendMicros } from '../core/metrics.ts';
import type { Ledger } from '../store/ledger.ts';
import type { TaskStore } from '../store/tasks.ts';
import type { UsageStore } from '../store/usage.ts';

// Balance activities. Each is idempotent on (task id, operation) through the ledger, so Temporal
// may retry them freely; capture and release share one settlement slot, so a task is either
// charged or refunded, never both.

export function createBillingActivities(deps: { ledger: Ledger; usage: UsageStore; tasks: TaskStore }) {
  return {
    /** Re-applies the hold the api placed (a no-op then); places it if an api crash skipped it.
     * Then claims the task for running (store/tasks.ts `decide`): a task the api abandoned first
     * (its submission failed after the task was stored, and the caller was told so) is not run,
     * its hold is returned and the workflow ends unbilled. */
    async holdFunds(input: { taskId: string; accountId: string; keyId: string; amountMicros: number }): Promise<'held' | 'insufficient_balance' | 'abandoned'> {
      const outcome = await deps.ledger.apply({ accountId: input.accountId, keyId: input.keyId, reference: input.taskId, operation: 'hold', amountMicros: input.amountMicros });
      if (outcome !== 'applied') return 'insufficient_balance';
      // A task closed without a decision on record (abandoned by an api from before decisions).
      const task = await deps.tasks.find(input.taskId);
      const closed = task !== null && task.status !== 'submitted' && task.status !== 'running';
      if (!closed && (await deps.tasks.decide(input.taskId, 'run')) === 'run') return 'held';
      await deps.ledger.apply({ accountId: input.accountId, keyId: input.keyId, reference: input.taskId, operation: 'release', amountMicros: input.amountMicros });
      return 'abandoned';
    },

    async settleHold(input: {
      taskId: string;
      accountId: string;
      keyId: string;
      modelId: string;
      amountMicros: number;
      outcome: 'capture' | 'release';
      videoSeconds: number;
    }): Promise<void> {
      // Whether an earlier attempt of this activity already settled, so spend is counted once.
      const settledBefore = input.outcome === 'capture' && (await deps.ledger.find(input.taskId, 'capture')) !== null;
      const result = await deps.ledger.apply({
        accountId: input.accountId,
        keyId: input.keyId,
        reference: input.taskId,
        operation: input.outcome,
        amountMicros: input.amountMicros,
      });
      if (result === 'conflict') {
        // The other settlement already happened: retrying cannot change that, and the task's
        // final state must follow the money, so this is a bug worth stopping on.
        throw ApplicationFailure.nonRetryable(`task ${input.taskId} was already settled the other way`, 'SettlementConflict');
      }
      if (result !== 'applied') throw new Error(`settlement of ${input.taskId} returned ${result}`);
      if (input.outcome === 'capture') {
        if (!settledBefore) spendMicros.inc({ kind: 'video', model: input.modelId }, input.amountMicros);
        await deps.usage.record({
          _id: `${input.taskId}:usage`,
          account_id: input.accountId,
          key_id: input.keyId,
          model: input.modelId,
          kind: 'video',
          requests: 1,
          video_seconds: input.videoSeconds,
          input_tokens: 0,
          output_tokens: 0,
          images: 0,
          spend_micros: input.amountMicros,
        });
      }
    },
  };
}
