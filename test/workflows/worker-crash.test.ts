import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProcess, waitForOutput, type ManagedProcess } from '../../scripts/lib/processes.ts';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { testTemporalAddress } from '../helpers/engines.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// Kill -9 the worker process while tasks are running, start a new one, and check that nothing
// was lost: every task reaches its final state, successes are charged once, failures released,
// and every webhook arrives (a redelivery keeps its webhook-id).

describe('a worker killed with SIGKILL mid-task', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('worker-crash', { withWorker: false });
  });
  after(() => stack.close());

  function startWorkerProcess(): ManagedProcess {
    return startProcess('worker', process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      env: {
        ...process.env,
        MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
        MONGODB_DB: stack.database.db.databaseName,
        TEMPORAL_ADDRESS: testTemporalAddress(),
        TEMPORAL_TASK_QUEUE: stack.taskQueue,
        SIMULATOR_URL: stack.simulatorUrl,
        PUBLIC_BASE_URL: stack.baseUrl,
        OUTBOUND_ALLOWLIST: 'loopback',
      },
    });
  }

  it('loses no task, double-bills nothing and delivers every webhook', async () => {
    const account = await createAccount(stack.app, { name: 'crash', balance_usd: 10 });
    const key = await createKey(stack.app, account.id);
    const client = videoClient(stack.baseUrl, key.key);
    const receiver = await startWebhookReceiver([200]);
    let worker = startWorkerProcess();
    try {
      await waitForOutput(worker, /worker polling/);
      const prompts = ['one', 'two', 'three', 'four', 'five [sim:fail]', 'six [sim:fail]'];
      const submitted = await Promise.all(
        prompts.map((prompt) =>
          client.submit({ model: 'seedance-2.0', prompt: `${prompt} [sim:delay=4]`, seconds: '4', metadata: { resolution: '480p', callback_url: receiver.url } }),
        ),
      );
      const taskIds = submitted.map((answer) => {
        assert.equal(answer.status, 200, JSON.stringify(answer.json));
        return answer.json.task_id as string;
      });

      // Kill only once every task is in the middle of its vendor work.
      const deadline = Date.now() + 30_000;
      while (!(await Promise.all(taskIds.map((id) => client.get(id)))).every((task) => task.status === 'running')) {
        assert.ok(Date.now() < deadline, 'tasks never all reached running');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      worker.child.kill('SIGKILL');
      await worker.exited;
      worker = startWorkerProcess();

      const finals = await Promise.all(taskIds.map((id) => client.waitForFinal(id, 120_000)));
      assert.deepEqual(finals.map((task) => task.status), ['succeeded', 'succeeded', 'succeeded', 'succeeded', 'failed', 'failed']);

      const settled = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      // 4 successes × 4 s × $0.04 = $0.64 charged; the failures were released.
      assert.deepEqual([settled.balance_usd, settled.held_usd, settled.spent_usd], [9.36, 0, 0.64]);
      const settlements = await stack.database.db.collection('ledger').find({ op_id: { $in: taskIds.map((id) => `${id}:settle`) } }).toArray();
      assert.equal(settlements.length, 6);
      assert.deepEqual(settlements.map((entry) => entry.operation).sort(), ['capture', 'capture', 'capture', 'capture', 'release', 'release']);
      assert.equal(await stack.database.db.collection('usage').countDocuments({ key_id: key.id }), 4);

      await receiver.waitFor(6, 60_000);
      for (const taskId of taskIds) {
        const deliveries = receiver.received.filter((delivery) => JSON.parse(delivery.body).task_id === taskId);
        assert.ok(deliveries.length >= 1, `no webhook for ${taskId}`);
        assert.ok(deliveries.every((delivery) => delivery.headers['webhook-id'] === `msg_${taskId}`));
      }
    } finally {
      await worker.stop();
      await receiver.close();
    }
  });
});
