import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { VendorRejectedError } from '../../vendors/types.ts';
import { createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';

// A vendor that accepts a task, then refuses every status read (404: it lost the task): the
// task ends failed with the vendor's words after three refusals, unbilled, instead of polling
// until its deadline an hour later.

describe('a vendor that refuses to report a task', () => {
  let stack: VideoStack;
  let stopWorker: () => Promise<void>;
  const statusReads: string[] = [];
  const cancelled: string[] = [];

  before(async () => {
    stack = await startVideoStack('vendor-refusals', { withWorker: false });
    ({ stop: stopWorker } = await startStackWorker(stack, {
      vendorOverrides: () => ({
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
});
