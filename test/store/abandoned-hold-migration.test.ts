import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountStore } from '../../store/accounts.ts';
import { releaseHoldsOfAbandonedTasks } from '../../store/abandoned-hold-migration.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore, type TaskDocument } from '../../store/tasks.ts';
import { testDatabase } from '../helpers/engines.ts';

// Before stop 48 an abandoned task was written `failed` before its hold was released, and a
// close cut between the two kept the hold for good. The migration releases those holds once.

describe('releasing the holds the old close order left on abandoned tasks', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('abandoned_holds');
  });
  after(() => database.drop());

  /** A task as the old close order could leave it: `status`, `error`, and a hold on the ledger. */
  async function storedTask(accountId: string, taskId: string, status: TaskDocument['status'], errorCode: string | undefined, ledger: Ledger, operations: Array<'hold' | 'release' | 'capture'>) {
    const now = new Date();
    await new TaskStore(database.db).collection.insertOne({
      _id: taskId,
      account_id: accountId,
      key_id: 'key_m',
      model: 'seedance-1.0-pro',
      status,
      seconds: 5,
      resolution: '720p',
      ratio: '16:9',
      metadata: {},
      price_micros: 150_000,
      progress: 0,
      ...(errorCode ? { error: { code: errorCode, message: 'm' } } : {}),
      request_id: 'req_m',
      workflow_started: true,
      workflow_input: { taskId, accountId, keyId: 'key_m', modelId: 'seedance-1.0-pro', upstream: 'sim', request: {} as never, holdMicros: 150_000, deadlineSeconds: 600, requestId: 'req_m' },
      created_at: now,
      updated_at: now,
    } as TaskDocument);
    for (const operation of operations) {
      assert.equal(await ledger.apply({ accountId, keyId: 'key_m', reference: taskId, operation, amountMicros: 150_000 }), 'applied');
    }
  }

  it('releases the hold of every task closed failed/gateway_unavailable, once, and touches nothing else', async () => {
    const db = database.db;
    const ledger = new Ledger(db);
    const account = await new AccountStore(db).create({ name: 'old-close', balanceMicros: 1_000_000 });
    const id = account._id;
    await storedTask(id, 'task_cut_a', 'failed', 'gateway_unavailable', ledger, ['hold']);
    await storedTask(id, 'task_cut_b', 'failed', 'gateway_unavailable', ledger, ['hold']);
    await storedTask(id, 'task_closed_whole', 'failed', 'gateway_unavailable', ledger, ['hold', 'release']);
    await storedTask(id, 'task_never_held', 'failed', 'gateway_unavailable', ledger, []);
    // Not abandoned: a running task's hold is its workflow's to settle.
    await storedTask(id, 'task_running', 'running', undefined, ledger, ['hold']);
    await storedTask(id, 'task_succeeded', 'succeeded', undefined, ledger, ['hold', 'capture']);
    assert.deepEqual(await ledger.totals(id).then(({ balance_micros, held_micros }) => ({ balance_micros, held_micros })), { balance_micros: 400_000, held_micros: 450_000 });
    // One without its input (written by hand) is passed over, not a reason to fail the start.
    await db.collection('tasks').insertOne({ _id: 'task_by_hand' as never, status: 'failed', error: { code: 'gateway_unavailable', message: 'm' } });
    await db.collection('migrations').deleteOne({ _id: 'abandoned-task-holds-released' as never });

    await releaseHoldsOfAbandonedTasks(db);
    const totals = await ledger.totals(id);
    assert.equal(totals.held_micros, 150_000, "only the running task's hold is left");
    assert.equal(totals.balance_micros, 700_000, 'the two cut closes gave their $0.15 back');
    assert.equal(await db.collection('ledger').countDocuments({ reference: 'task_closed_whole' }), 2, 'a released hold is not released again');
    assert.ok(await db.collection('migrations').findOne({ _id: 'abandoned-task-holds-released' as never }), 'recorded as done');

    // Run twice (two processes starting together): nothing moves again.
    await db.collection('migrations').deleteOne({ _id: 'abandoned-task-holds-released' as never });
    await releaseHoldsOfAbandonedTasks(db);
    assert.deepEqual(await ledger.totals(id), totals);
  });
});
