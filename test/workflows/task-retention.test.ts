import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { KeyCreationStore } from '../../store/key-creations.ts';
import { Ledger } from '../../store/ledger.ts';
import { RateLimitBlockStore } from '../../store/rate-limit-blocks.ts';
import { SweeperCursorStore } from '../../store/sweeper-cursors.ts';
import { TaskRetention } from '../../store/task-retention.ts';
import { TaskStore } from '../../store/tasks.ts';
import { sweepOnce } from '../../worker/sweeper.ts';
import { TaskPruning } from '../../worker/task-pruning.ts';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { waitUntil } from '../helpers/wait-until.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// TASK_RETENTION_DAYS through the worker's sweeper, on tasks run by the real stack: the settled
// ones are gone from the API after their days (404), the money and the usage stay, and a task
// still running is left alone. The sweep is given a clock days ahead instead of waiting them.

describe('tasks past TASK_RETENTION_DAYS', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('task-retention');
  });
  after(() => stack.close());

  const DAY = 86_400_000;

  it('are deleted by the sweeper once settled that long: 404 from the API, the ledger and the usage report unchanged', async () => {
    const receiver = await startWebhookReceiver([200]);
    try {
      const account = await createAccount(stack.app, { name: 'retention', balance_usd: 5 });
      const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
      const submit = async (prompt: string, metadata: Record<string, unknown> = {}) => {
        const submitted = await client.submit({ model: 'seedance-2.0', prompt, seconds: '4', metadata: { resolution: '480p', ...metadata } });
        assert.equal(submitted.status, 200, JSON.stringify(submitted.json));
        return submitted.json.task_id as string;
      };
      const called = await submit('kept a while [sim:delay=0]', { callback_url: receiver.url });
      const failed = await submit('fails [sim:fail]');
      const running = await submit('still going [sim:delay=600]');
      assert.equal((await client.waitForFinal(called, 20_000)).status, 'succeeded');
      assert.equal((await client.waitForFinal(failed, 20_000)).status, 'failed');
      await receiver.waitFor(1);
      const tasks = new TaskStore(stack.database.db);
      await waitUntil(async () => (await tasks.find(called))?.webhook?.state === 'delivered', 10_000);
      const money = async () => (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
      const usage = async () => (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}/usage`, headers: adminHeaders })).json();
      const [moneyBefore, usageBefore] = [await money(), await usage()];
      assert.ok(moneyBefore.spent_usd > 0 && usageBefore.totals.spend_usd === moneyBefore.spent_usd, JSON.stringify([moneyBefore, usageBefore]));

      const { db } = stack.database;
      const lines: string[] = [];
      const sweep = (pruning: TaskPruning, now: Date) =>
        sweepOnce({
          tasks, ledger: new Ledger(db), client: stack.temporal.client, taskQueue: stack.taskQueue, log: (line) => lines.push(line),
          leases: new BudgetLeaseStore(db), rateLimitBlocks: new RateLimitBlockStore(db), idempotency: new IdempotencyStore(db), keyCreations: new KeyCreationStore(db),
          cursors: new SweeperCursorStore(db), pruning,
        }, now);
      const ours = [called, failed, running];
      const stored = async () => (await tasks.collection.find({ _id: { $in: ours } }, { projection: { _id: 1 } }).toArray()).map((task) => task._id).sort();

      // Off (0 days), or before their days are over: every task stays.
      assert.equal(await new TaskPruning(new TaskRetention(db), 0).run(new Date(Date.now() + 30 * DAY)), 0);
      assert.equal(await new TaskPruning(new TaskRetention(db), 2).run(new Date(Date.now() + DAY)), 0);
      assert.deepEqual(await stored(), [...ours].sort());

      // Three days on, with 2 days' retention, through a whole round of the sweeper (whose
      // terminated-runs step then keeps its place three days ahead, on this test's own queue):
      // the settled two are gone, the running one stays.
      assert.deepEqual(await sweep(new TaskPruning(new TaskRetention(db), 2, (line) => lines.push(line)), new Date(Date.now() + 3 * DAY)), []);
      assert.deepEqual(await stored(), [running]);
      assert.ok(lines.some((line) => /sweeper deleted \d+ tasks settled before .* \(TASK_RETENTION_DAYS=2\)/.test(line)), lines.join('\n'));
      for (const id of [called, failed]) {
        const answer = await client.getRaw(id);
        assert.equal(answer.status, 404, answer.text);
        assert.equal(JSON.parse(answer.text).error.type, 'not_found_error');
      }
      assert.ok(['submitted', 'running'].includes((await client.get(running)).status));
      // The money and what the console reports of it are not the tasks': both unchanged.
      assert.deepEqual(await money(), moneyBefore);
      assert.deepEqual(await usage(), usageBefore);
      // Its ten minutes are not this test's.
      await stack.temporal.client.workflow.getHandle(running).terminate('the test is over');
    } finally {
      await receiver.close();
    }
  });
});
