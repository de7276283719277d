import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { nextTryDelayMs } from '../../activities/vendor.ts';
import { VendorTransientError } from '../../vendors/types.ts';
import { createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// A vendor that is down answers 503 with a short Retry-After. The submission must still back
// off (1 s, 2 s, 4 s … up to a minute): a Retry-After alone replaced the backoff, and a vendor
// down for the submission's 30 minutes was called every second, about 1,800 times per task.

const FAILED_TRIES = 3;

describe('a vendor that is down and asks to be retried at once', () => {
  let stack: VideoStack;
  let stopWorker: () => Promise<void>;
  const startedAt: number[] = [];

  before(async () => {
    stack = await startVideoStack('vendor-retry-backoff', { withWorker: false });
    ({ stop: stopWorker } = await startStackWorker(stack, {
      vendorOverrides: (vendor) => ({
        async start(request, taskId) {
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
