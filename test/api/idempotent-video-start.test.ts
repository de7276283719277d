import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey } from '../helpers/app.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// A video submission under an Idempotency-Key whose workflow start Temporal recorded just as
// the api gave up on it (its start deadline passed). The workflow claims a keyed task at once,
// so the task runs and is billed. Answered 503, the caller retried under the same key, whose
// record an error answer lets go, and got a second task, billed too: one key, two charges (a
// review of the money path). The api now learns from its close of the task that the workflow
// claimed it, and answers with the task; the retry replays that answer.

const body = { model: 'seedance-2.0', prompt: 'once, under one key [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } };

describe('a keyed video submission whose workflow start went through as the api gave up on it', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('idempotent-video-start');
  });
  after(() => stack.close());

  it('gets its task, and its retry under the key the same task: charged once', async () => {
    const account = await createAccount(stack.app, { name: 'keyed-late-start', balance_usd: 5 });
    const { key } = await createKey(stack.app, account.id);
    const decisions = stack.database.db.collection('task_decisions');
    const workflow = stack.temporal.client.workflow;
    const realStart = workflow.start.bind(workflow);
    let late = true;
    // The start is recorded and the workflow claims its task; only then does the call fail.
    (workflow as { start: unknown }).start = async (...args: Parameters<typeof workflow.start>) => {
      const handle = await realStart(...args);
      if (!late) return handle;
      late = false;
      await waitUntil(async () => (await decisions.countDocuments({ _id: handle.workflowId } as never)) === 1);
      throw new Error('deadline exceeded (simulated)');
    };
    try {
      const submit = () =>
        stack.app.inject({ method: 'POST', url: '/v1/video/generations', headers: { ...bearer(key), 'idempotency-key': 'one-logical-request' }, payload: body });
      const first = await submit();
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(late, false, 'the start did go through late');
      const retry = await submit();
      assert.equal(retry.statusCode, 200, retry.body);
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.json().task_id, first.json().task_id);

      const tasks = await stack.database.db.collection('tasks').find({ account_id: account.id }).toArray();
      assert.deepEqual(tasks.map((task) => task._id), [first.json().task_id], 'one task for one key');
      const accountView = async () => (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      await waitUntil(async () => (await accountView()).held_usd === 0, 20_000);
      assert.equal((await accountView()).spent_usd, tasks[0]!.price_micros / 1_000_000, 'charged once');
    } finally {
      (workflow as { start: unknown }).start = realStart;
    }
  });
});
