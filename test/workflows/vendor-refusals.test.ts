import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { VendorRejectedError } from '../../vendors/types.ts';
import { createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';
import { newId } from '../../core/ids.ts';
import { startTaskWorkflow } from '../../core/start-task-workflow.ts';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';

// A vendor that accepts a task, then refuses every status read (404: it lost the task): the
// task ends failed with the vendor's words after three refusals, unbilled, instead of polling
// until its deadline an hour later. And a task whose upstream is gone from the catalog ends at
// once.

describe('a vendor that refuses to report a task', () => {
  let stack: VideoStack;
  let stopWorker: () => Promise<void>;
  const statusReads: string[] = [];
  const cancelled: string[] = [];

  before(async () => {
    stack = await startVideoStack('vendor-refusals', { withWorker: false });
    ({ stop: stopWorker } = await startStackWorker(stack, {
      vendorOverrides: (real) => ({
        async start(request, taskId) {
          // The operator's key refused, in the words OpenAI uses, which quote part of it.
          if (request.prompt.includes('[key refused]')) throw new VendorRejectedError('sora answered 401 invalid_api_key: Incorrect API key provided: sk-proj-AbC1****wxyz', 401, 'invalid_api_key');
          if (request.prompt.includes('[bad prompt]')) throw new VendorRejectedError('seedance answered 400 InvalidParameter: the prompt must not be empty of meaning', 400, 'InvalidParameter');
          return real.start(request, taskId);
        },
        async status(vendorTaskId) {
          statusReads.push(vendorTaskId);
          throw new VendorRejectedError('seedance: GET task answered 404: the task does not exist', 404);
        },
        async cancel(vendorTaskId) {
          cancelled.push(vendorTaskId);
        },
      }),
    }));
  });
  after(async () => {
    await stopWorker();
    await stack.close();
  });

  it('ends the task failed after three refused status reads, and bills nothing', async () => {
    const account = await createAccount(stack.app, { name: 'refused', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'lost by the vendor [sim:delay=60]' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'failed');
    assert.equal(task.error?.code, 'vendor_rejected');
    assert.match(task.error?.message ?? '', /would not report the task's status: .*404/);
    assert.equal(statusReads.length, 3);
    assert.equal(cancelled.length, 1);
    const totals = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: { authorization: `Bearer ${stack.config.ADMIN_TOKEN}` } })).json();
    assert.deepEqual([totals.balance_usd, totals.held_usd, totals.spent_usd], [5, 0, 0]);
    await recordHistoryIfAsked(submitted.json.task_id, 'video-task-status-reads-refused');
  });
  it("gives the caller the vendor's words for a refusal of the request, and only the status and code for one of the gateway's setup", async () => {
    const account = await createAccount(stack.app, { name: 'refused-words', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const keyRefused = await client.waitForFinal((await client.submit({ model: 'seedance-2.0', prompt: 'a fox [key refused]' })).json.task_id);
    assert.equal(keyRefused.error?.code, 'vendor_rejected');
    assert.equal(keyRefused.error?.message, 'The vendor refused the task: it answered 401 invalid_api_key');
    const badPrompt = await client.waitForFinal((await client.submit({ model: 'seedance-2.0', prompt: 'a fox [bad prompt]' })).json.task_id);
    assert.equal(badPrompt.error?.message, 'The vendor refused the task: seedance answered 400 InvalidParameter: the prompt must not be empty of meaning');
    // The operator still reads the vendor's words, in the failure's details in the Web UI.
    const history = await stack.temporal.client.workflow.getHandle(keyRefused.task_id).fetchHistory();
    const failure = history.events?.find((event) => event.activityTaskFailedEventAttributes)?.activityTaskFailedEventAttributes?.failure;
    const details = JSON.stringify(failure?.applicationFailureInfo?.details?.payloads?.map((payload) => Buffer.from(payload.data ?? []).toString()));
    assert.match(details, /Incorrect API key provided: sk-proj-AbC1/);
  });

  it('ends a task whose upstream left the catalog at once, not after 30 minutes of submissions', async () => {
    // As after an operator removed the upstream while its tasks still ran: asking again cannot help.
    const accounts = new AccountStore(stack.database.db);
    const tasks = new TaskStore(stack.database.db);
    const ledger = new Ledger(stack.database.db);
    const account = await accounts.create({ name: 'removed upstream', balanceMicros: 1_000_000 });
    const taskId = newId('task');
    const input: VideoTaskWorkflowInput = {
      taskId, accountId: account._id, keyId: 'key_removed', modelId: 'seedance-2.0', upstream: 'removed-upstream',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: 'x', seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros: 160_000, deadlineSeconds: 3600, requestId: 'req_removed',
    };
    const now = new Date();
    await tasks.insert({
      _id: taskId, account_id: account._id, key_id: 'key_removed', model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: {}, price_micros: 160_000, progress: 0, request_id: 'req_removed', workflow_started: false, workflow_input: input, created_at: now, updated_at: now,
    });
    await ledger.apply({ accountId: account._id, keyId: 'key_removed', reference: taskId, operation: 'hold', amountMicros: 160_000 });
    const started = Date.now();
    await startTaskWorkflow(stack.temporal.client, stack.taskQueue, input);
    const result = await stack.temporal.client.workflow.getHandle(taskId).result();
    assert.ok(Date.now() - started < 10_000, `ended after ${Date.now() - started} ms`);
    assert.equal(result.status, 'failed');
    assert.equal(result.error?.code, 'vendor_unavailable');
    assert.match(result.error!.message, /the upstream 'removed-upstream' is not in the gateway's catalog/);
    const totals = await ledger.totals(account._id);
    assert.deepEqual([totals.balance_micros, totals.held_micros, totals.spent_micros], [1_000_000, 0, 0]);
  });
});
