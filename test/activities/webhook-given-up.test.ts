import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createWebhookActivities } from '../../activities/webhooks.ts';
import { webhookAttempts } from '../../core/metrics.ts';
import { createGuardedDispatcher, parseOutboundAllowlist } from '../../core/outbound-guard.ts';
import { AccountStore } from '../../store/accounts.ts';
import { TaskStore } from '../../store/tasks.ts';
import { taskDocument } from '../helpers/console-fixtures.ts';
import { testDatabase } from '../helpers/engines.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// A webhook given up reads `exhausted` and is counted once in
// framegate_webhook_attempts_total{outcome="exhausted"} (the metric operators alert on), by
// whichever write gave it up: the last attempt's own record, or the workflow's
// markWebhookGivenUp after it (workflows/webhook-schedule.ts), whichever came first.

describe('a webhook given up', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('loopback') });
  before(async () => {
    database = await testDatabase('webhook_given_up');
    receiver = await startWebhookReceiver([500]);
  });
  after(async () => {
    await receiver.close();
    await dispatcher.close();
    await database.drop();
  });

  const exhaustedCount = async () => (await webhookAttempts.get()).values.find((value) => value.labels.outcome === 'exhausted')?.value ?? 0;
  const activitiesOver = (tasks: TaskStore) => createWebhookActivities({ tasks, accounts: new AccountStore(database.db), dispatcher, publicBaseUrl: 'http://127.0.0.1:8080', warn: () => {} });

  async function pendingTask(tasks: TaskStore) {
    const account = await new AccountStore(database.db).create({ name: 'given up', balanceMicros: 0 });
    const task = taskDocument({ account_id: account._id, key_id: 'key_given_up', webhook: { url: receiver.url, state: 'pending', attempts: [] } });
    await tasks.insert(task);
    return task;
  }

  it('is counted once when its last attempt recorded it, and the mark after it changes nothing', async () => {
    const tasks = new TaskStore(database.db);
    const task = await pendingTask(tasks);
    const before = await exhaustedCount();
    assert.equal((await activitiesOver(tasks).deliverTaskWebhook({ taskId: task._id, attempt: 10, lastAttempt: true })).outcome, 'retry');
    await activitiesOver(tasks).markWebhookGivenUp({ taskId: task._id });
    assert.equal((await exhaustedCount()) - before, 1);
    const stored = await tasks.find(task._id);
    assert.deepEqual([stored?.webhook?.state, stored?.webhook?.attempts.length], ['exhausted', 1]);
  });

  it('is recorded and counted by the mark when the last attempt could not record itself', async () => {
    class TasksRefusingRecords extends TaskStore {
      override async recordWebhookAttempt(): Promise<never> {
        throw new Error('store unreachable (simulated)');
      }
    }
    const tasks = new TaskStore(database.db);
    const task = await pendingTask(tasks);
    const before = await exhaustedCount();
    await activitiesOver(new TasksRefusingRecords(database.db)).deliverTaskWebhook({ taskId: task._id, attempt: 10, lastAttempt: true });
    assert.equal(await exhaustedCount(), before, 'not counted by an attempt whose record was lost');
    assert.equal((await tasks.find(task._id))?.webhook?.state, 'pending');
    await activitiesOver(tasks).markWebhookGivenUp({ taskId: task._id });
    await activitiesOver(tasks).markWebhookGivenUp({ taskId: task._id });
    assert.equal((await exhaustedCount()) - before, 1, 'counted once, by the first mark');
    assert.equal((await tasks.find(task._id))?.webhook?.state, 'exhausted');
  });

  it('is counted once when a cut-off last attempt records itself after the mark', async () => {
    // The attempt outlived its 45 s (a hung store write) on a worker still alive: the workflow
    // marked the webhook given up, then the attempt's record landed.
    const tasks = new TaskStore(database.db);
    const task = await pendingTask(tasks);
    const before = await exhaustedCount();
    await activitiesOver(tasks).markWebhookGivenUp({ taskId: task._id });
    await activitiesOver(tasks).deliverTaskWebhook({ taskId: task._id, attempt: 10, lastAttempt: true });
    assert.equal((await exhaustedCount()) - before, 1);
    const stored = await tasks.find(task._id);
    assert.deepEqual([stored?.webhook?.state, stored?.webhook?.attempts.length], ['exhausted', 1], 'the late attempt is still on the record');
  });
});
