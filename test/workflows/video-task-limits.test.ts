import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// Deadlines, isolation between tasks, the SSRF guard on callbacks, and what an operator sees.
// This stack gives tasks a 3-second deadline and allows no internal webhook destination.

describe('video task limits', () => {
  let stack: VideoStack;
  let key: { id: string; key: string };
  let accountId: string;
  before(async () => {
    stack = await startVideoStack('video-limits', { deadlineSeconds: 3, outboundAllowlist: '' });
    accountId = (await createAccount(stack.app, { name: 'limits', balance_usd: 10 })).id;
    key = await createKey(stack.app, accountId);
  });
  after(() => stack.close());

  it('a task past its deadline fails, is released, and its vendor task is cancelled', async () => {
    const client = videoClient(stack.baseUrl, key.key);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'too slow [sim:delay=30]', seconds: '4', metadata: { resolution: '480p' } });
    const task = await client.waitForFinal(submitted.json.task_id, 30_000);
    assert.equal(task.status, 'failed');
    assert.equal(task.error?.code, 'deadline_exceeded');
    const stored = await stack.database.db.collection('tasks').findOne({ _id: submitted.json.task_id });
    const vendorTask = await request(`${stack.simulatorUrl}/api/v3/contents/generations/tasks/${stored?.vendor_task_id}`, { headers: { authorization: 'Bearer sim' } });
    assert.equal(((await vendorTask.body.json()) as { status: string }).status, 'cancelled');
    const account = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${accountId}`, headers: adminHeaders })).json();
    assert.equal(account.held_usd, 0);
    assert.equal(account.spent_usd, 0);
  });

  it('a task whose vendor cannot be reached at submission fails at its deadline, not after the 30 minutes of submission retries', async () => {
    const client = videoClient(stack.baseUrl, key.key);
    const started = Date.now();
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: `unreachable ${Date.now()} [sim:down]`, seconds: '4', metadata: { resolution: '480p' } });
    const task = await client.waitForFinal(submitted.json.task_id, 20_000);
    assert.equal(task.status, 'failed');
    assert.equal(task.error?.code, 'deadline_exceeded');
    assert.match(task.error!.message, /^The vendor could not be reached within the task's deadline of 3 seconds: /);
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  });

  it('a slow task does not delay a fast one submitted after it', async () => {
    const client = videoClient(stack.baseUrl, key.key);
    const slow = await client.submit({ model: 'seedance-2.0', prompt: 'slow one [sim:delay=2.5]', seconds: '4', metadata: { resolution: '480p' } });
    const started = Date.now();
    const fast = await client.submit({ model: 'seedance-2.0', prompt: 'fast one [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } });
    const fastTask = await client.waitForFinal(fast.json.task_id);
    const fastSeconds = (Date.now() - started) / 1000;
    assert.equal(fastTask.status, 'succeeded');
    assert.ok((await client.get(slow.json.task_id)).status !== 'succeeded', 'the slow task finished first');
    assert.ok(fastSeconds < 2.5, `the fast task took ${fastSeconds} s`);
    assert.equal((await client.waitForFinal(slow.json.task_id)).status, 'succeeded');
  });

  it('refuses to call back a loopback address without an allowlist, and says why', async () => {
    const client = videoClient(stack.baseUrl, key.key);
    const receiver = await startWebhookReceiver([200]);
    try {
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'internal hook [sim:delay=0]', metadata: { callback_url: receiver.url } });
      assert.equal((await client.waitForFinal(submitted.json.task_id)).status, 'succeeded');
      let stored;
      for (let attempt = 0; attempt < 100 && stored?.webhook?.state !== 'refused'; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        stored = await stack.database.db.collection('tasks').findOne({ _id: submitted.json.task_id });
      }
      assert.equal(stored?.webhook?.state, 'refused');
      // The holder reads that it was refused, not what the name resolved to or how to allow it.
      assert.equal(stored?.webhook?.attempts[0].error, 'refused: 127.0.0.1 is a loopback address, which the gateway does not call');
      assert.equal(receiver.received.length, 0);
    } finally {
      await receiver.close();
    }
  });

  it('attaches account, key, model and request id to the workflow for the Temporal Web UI', async () => {
    const client = videoClient(stack.baseUrl, key.key);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'memo [sim:delay=0]' });
    const description = await stack.temporal.client.workflow.getHandle(submitted.json.task_id).describe();
    assert.equal(description.taskQueue, stack.taskQueue);
    assert.deepEqual(
      { account: description.memo?.account_id, key: description.memo?.key_id, model: description.memo?.model },
      { account: accountId, key: key.id, model: 'seedance-2.0' },
    );
    assert.match(String(description.memo?.request_id), /^req_/);
    await client.waitForFinal(submitted.json.task_id);
  });
});
