import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { request } from 'undici';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import { sweepTerminatedRuns, type TerminatedRunCursor } from '../../worker/sweeper.ts';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// An operator who terminates a task's workflow (the Web UI's Terminate, `temporal workflow
// terminate`) runs none of its code: unlike a cancel, nothing settled the task, which stayed
// `running` with its price held for good, and its webhook never went out. The sweeper starts a
// closing run for such a task.

describe('a task whose workflow an operator terminated', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('terminated-run');
  });
  after(() => stack.close());

  it('is closed by the sweeper: vendor task cancelled, hold released, task failed as cancelled, webhook sent', async () => {
    const account = await createAccount(stack.app, { name: 'terminated', balance_usd: 5 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const receiver = await startWebhookReceiver([200]);
    try {
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'stopped by hand [sim:delay=60]', seconds: '4', metadata: { resolution: '480p', callback_url: receiver.url } });
      assert.equal(submitted.status, 200);
      const taskId = submitted.json.task_id as string;
      const tasks = new TaskStore(stack.database.db);
      for (const started = Date.now(); !(await tasks.find(taskId))?.vendor_task_id; await pause(50)) assert.ok(Date.now() - started < 10_000, 'the vendor never got the task');
      await stack.temporal.client.workflow.getHandle(taskId).terminate('an operator stops it');

      const options = { tasks, ledger: new Ledger(stack.database.db), client: stack.temporal.client, taskQueue: stack.taskQueue };
      const cursor: TerminatedRunCursor = { since: new Date(Date.now() - 60_000) };
      // Temporal lists a closed run after a short delay.
      let closing = 0;
      for (const started = Date.now(); closing === 0; await pause(200)) {
        assert.ok(Date.now() - started < 15_000, 'the sweeper never found the terminated run');
        closing = await sweepTerminatedRuns(options, { ...cursor });
      }
      assert.equal(closing, 1);

      const task = await client.waitForFinal(taskId, 20_000);
      assert.equal(task.status, 'failed');
      assert.equal(task.error?.code, 'cancelled');
      assert.match(task.error!.message, /terminated/);
      const billed = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      assert.deepEqual([billed.held_usd, billed.spent_usd, billed.balance_usd], [0, 0, 5]);
      const vendorTaskId = (await tasks.find(taskId))!.vendor_task_id;
      const vendorTask = await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${vendorTaskId}`, { headers: { authorization: 'Bearer sim' } });
      assert.equal(((await vendorTask.body.json()) as { status: string }).status, 'cancelled');
      for (const started = Date.now(); receiver.received.length === 0; await pause(50)) assert.ok(Date.now() - started < 10_000, 'no webhook');
      assert.equal(JSON.parse(receiver.received[0]!.body).error.code, 'cancelled');
      // Closed: later rounds leave it alone.
      assert.equal(await sweepTerminatedRuns(options, { ...cursor }), 0);
    } finally {
      await receiver.close();
    }
  });
});
