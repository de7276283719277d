import { ApplicationFailure, Context } from '@temporalio/activity';
import { spendMicros } from '../core/metrics.ts';
import { UNANSWERED_SUBMISSION_GRACE_MS } from '../core/video-task.ts';
import type { Ledger } from '../store/ledger.ts';
import type { TaskDecision, TaskDocument, TaskStore } from '../store/tasks.ts';
import type { UsageStore } from '../store/usage.ts';

// Balance activities. Each is idempotent on (task id, operation) through the ledger, so Temporal
// may retry them freely; capture and release share one settlement slot, so a task is either
// charged or refunded, never both.

/** Within one attempt of holdFunds, how long and how often to look for the api's claim. */
const CLAIM_WAIT_PER_ATTEMPT_MS = 5_000;
const CLAIM_POLL_MS = 100;

export function createBillingActivities(deps: { ledger: Ledger; usage: UsageStore; tasks: TaskStore; answerGraceMs?: number }) {
  const answerGraceMs = deps.answerGraceMs ?? UNANSWERED_SUBMISSION_GRACE_MS;

  /**
   * Whether the task runs (store/tasks.ts `decide`: the first to record a decision wins). A task
   * its caller can find again (it came with an Idempotency-Key, or predates the flag) is claimed
   * here. Any other runs only once its api claimed it, just before answering: an api that died
   * after starting this workflow and before answering left a caller who saw the connection drop
   * and may have submitted again, and running that task billed them twice. So the claim is
   * waited for (retrying the activity), and past the grace since the task was stored the task
   * is closed here instead.
   */
  async function decisionOn(task: TaskDocument | null, taskId: string): Promise<TaskDecision> {
    if (task?.recoverable !== false) return deps.tasks.decide(taskId, 'run');
    // The grace runs from this activity's first scheduling, on the Temporal server's clock (both
    // timestamps below), then on this process's: the api's clock, which stamped the task, may
    // be off from this one by more than the grace.
    const { scheduledTimestampMs, currentAttemptScheduledTimestampMs } = Context.current().info;
    const attemptStarted = Date.now();
    const waited = () => currentAttemptScheduledTimestampMs - scheduledTimestampMs + (Date.now() - attemptStarted);
    const waitUntil = attemptStarted + CLAIM_WAIT_PER_ATTEMPT_MS;
    for (;;) {
      const decided = await deps.tasks.decisionOf(taskId);
      if (decided) return decided;
      if (waited() >= answerGraceMs) return deps.tasks.decide(taskId, 'abandon');
      if (Date.now() >= waitUntil) throw ApplicationFailure.retryable(`task ${taskId} is not claimed by its submission yet`, 'AwaitingCallersClaim');
      await new Promise((resolve) => setTimeout(resolve, CLAIM_POLL_MS));
    }
  }

  /**
   * Temporal takes a workflow's input on trust: whoever can reach the server can start a run that
   * names any account and any amount. The task the api stored before starting the run is the
   * authority, so a run whose account, key or price is not its stored task's holds nothing: it
   * fails here, at its first step, for an operator to see (no task of a caller is behind it).
   */
  async function refuseUnlessStored(input: { taskId: string; accountId: string; keyId: string; amountMicros: number }): Promise<void> {
    // The gateway starts a task's run under the task's id, so only one runs at a time: a second
    // run of a live task (another workflow id) would hold nothing new, yet reach the vendor.
    const workflowId = Context.current().info.workflowExecution?.workflowId;
    const task = workflowId === input.taskId ? await deps.tasks.find(input.taskId) : null;
    if (task && task.account_id === input.accountId && task.key_id === input.keyId && task.price_micros === input.amountMicros) return;
    const why =
      workflowId !== input.taskId ? `the run's workflow id ${workflowId} is not the task's` : task ? 'its input does not match the stored task (account, key or price)' : 'no task with this id was stored';
    throw ApplicationFailure.nonRetryable(`task ${input.taskId}: ${why}; nothing was held, and a run not started by the gateway is not run`, 'TaskInputMismatch');
  }

  return {
    /** Re-applies the hold the api placed (a no-op then); places it if an api crash skipped it.
     * Then learns whether the task runs (decisionOn): a task the api abandoned first (its
     * submission failed after the task was stored, and the caller was told so), or that no
     * caller ever got, is not run, its hold is returned and the workflow ends unbilled. */
    async holdFunds(input: { taskId: string; accountId: string; keyId: string; amountMicros: number }): Promise<'held' | 'insufficient_balance' | 'abandoned'> {
      await refuseUnlessStored(input);
      const outcome = await deps.ledger.apply({ accountId: input.accountId, keyId: input.keyId, reference: input.taskId, operation: 'hold', amountMicros: input.amountMicros });
      if (outcome !== 'applied') return 'insufficient_balance';
      // A task closed without a decision on record (abandoned by an api from before decisions).
      const task = await deps.tasks.find(input.taskId);
      const closed = task !== null && task.status !== 'submitted' && task.status !== 'running';
      if (!closed && (await decisionOn(task, input.taskId)) === 'run') return 'held';
      await deps.ledger.apply({ accountId: input.accountId, keyId: input.keyId, reference: input.taskId, operation: 'release', amountMicros: input.amountMicros });
      // Its webhook is not sent (the workflow skips it): it must not read as pending for good.
      await deps.tasks.endPendingWebhook(input.taskId, 'stopped');
      return 'abandoned';
    },

    /** Where a task's money stands on the ledger: captured or released (settled), held, or
     * never held (its run ended before the hold). */
    async findSettlement(input: { taskId: string; accountId?: string }): Promise<'captured' | 'released' | 'held' | 'none'> {
      // The account's chain holds the one entry that may lack its marker (store/ledger.ts).
      // Workflows from before the account was passed name only the task: its document tells,
      // and one whose document is gone is read by markers alone.
      const accountId = input.accountId ?? (await deps.tasks.find(input.taskId))?.account_id;
      const find = (operation: 'capture' | 'release' | 'hold') => (accountId ? deps.ledger.find(accountId, input.taskId, operation) : deps.ledger.findMarked(input.taskId, operation));
      if (await find('capture')) return 'captured';
      if (await find('release')) return 'released';
      return (await find('hold')) ? 'held' : 'none';
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
      const settledBefore = input.outcome === 'capture' && (await deps.ledger.find(input.accountId, input.taskId, 'capture')) !== null;
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
