import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { nextTryDelayMs } from '../../activities/vendor.ts';
import { VendorRejectedError, VendorTransientError } from '../../vendors/types.ts';
import { createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// A vendor that is down answers 503 with a short Retry-After. The submission must still back
// off (1 s, 2 s, 4 s … up to a minute): a Retry-After alone replaced the backoff, and a vendor
// down for the submission's 30 minutes was called every second, about 1,800 times per task.
// And a vendor that answers a retried create 409 while the earlier try under the same
// Idempotency-Key is still in progress: the task must wait for that try, not fail.

const FAILED_TRIES = 3;

describe('a vendor that is down and asks to be retried at once', () => {
  let stack: VideoStack;
  let stopWorker: () => Promise<void>;
  const startedAt: number[] = [];
  const inFlightTries: string[] = [];

  before(async () => {
    stack = await startVideoStack('vendor-retry-backoff', { withWorker: false });
    ({ stop: stopWorker } = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async start(request, taskId) {
          if (request.prompt.includes('[in flight]')) {
            inFlightTries.push(taskId ?? '');
            if (inFlightTries.length === 1) {
              // The vendor creates the task, and the answer never reaches the worker.
              await vendor.start(request, taskId);
              throw new VendorTransientError('seedance did not answer within 60 s');
            }
            if (inFlightTries.length === 2) throw new VendorRejectedError('seedance answered 409 IdempotencyKeyInUse: a request with this key is in progress', 409, 'IdempotencyKeyInUse');
            return vendor.start(request, taskId);
          }
          startedAt.push(performance.now());
          if (startedAt.length <= FAILED_TRIES) throw new VendorTransientError('seedance answered 503', 503, 100);
          return vendor.start(request, taskId);
        },
      }),
    }));
  });
  after(async () => {
    await stopWorker();
    await stack.close();
  });

  it('waits the backoff between submission tries when Retry-After asks for less, and the task then succeeds', async () => {
    const account = await createAccount(stack.app, { name: 'backoff', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'a vendor coming back [sim:delay=0]' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'succeeded');
    assert.equal(startedAt.length, FAILED_TRIES + 1);
    const gaps = startedAt.slice(1).map((at, index) => at - startedAt[index]!);
    // The policy's 1 s, 2 s and 4 s, where Retry-After said 0.1 s (a little slack for timers).
    for (const [index, gap] of gaps.entries()) assert.ok(gap >= 1_000 * 2 ** index - 100, `gap ${index + 1}: ${Math.round(gap)} ms (${gaps.map(Math.round).join(', ')})`);
  });

  it('takes a 409 to a retried create as the earlier try still in progress: one vendor task, succeeded, billed once', async () => {
    const simulatorTasks = async () => ((await (await fetch(`${stack.simulatorUrl}/_sim/stats`)).json()) as { video_tasks: number }).video_tasks;
    const account = await createAccount(stack.app, { name: 'in-flight', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const before = await simulatorTasks();
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'a create still in progress [in flight] [sim:delay=0]', seconds: '4' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
    assert.equal(inFlightTries.length, 3);
    assert.ok(inFlightTries.every((key) => key === submitted.json.task_id), 'every try under the task id as its key');
    assert.equal((await simulatorTasks()) - before, 1);
    const totals = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: { authorization: `Bearer ${stack.config.ADMIN_TOKEN}` } })).json();
    assert.equal(totals.held_usd, 0);
    assert.ok(totals.spent_usd > 0 && totals.balance_usd === 5 - totals.spent_usd, JSON.stringify(totals));
  });

  it('takes the longer of the backoff and Retry-After', () => {
    const policy = { initialInterval: 1_000, backoffCoefficient: 2, maximumInterval: 60_000 };
    assert.equal(nextTryDelayMs({ attempt: 1, retryPolicy: policy }, 100), 1_000);
    assert.equal(nextTryDelayMs({ attempt: 4, retryPolicy: policy }, 1_000), 8_000);
    assert.equal(nextTryDelayMs({ attempt: 20, retryPolicy: policy }, 1_000), 60_000);
    assert.equal(nextTryDelayMs({ attempt: 2, retryPolicy: policy }, 30_000), 30_000);
    // No Retry-After: the policy alone decides.
    assert.equal(nextTryDelayMs({ attempt: 2, retryPolicy: policy }, undefined), undefined);
  });
});
