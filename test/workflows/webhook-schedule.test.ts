import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Webhook } from 'standardwebhooks';
import { loadCatalog } from '../../core/catalog.ts';
import { webhookAttempts } from '../../core/metrics.ts';
import { newId } from '../../core/ids.ts';
import { WEBHOOK_RETRY_SCHEDULE_SECONDS, type VideoTaskWorkflowInput } from '../../core/video-task.ts';
import { buildSimulator } from '../../simulator/app.ts';
import { AccountStore, type AccountDocument } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import { createVideoWorker, type VideoWorker } from '../../worker/create-worker.ts';
import type { videoTaskWorkflow } from '../../workflows/video-task.ts';
import { temporalTestServerPath, testDatabase, uniqueName } from '../helpers/engines.ts';
import { recordFetchedHistoryIfAsked } from '../helpers/histories.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// The whole webhook retry schedule (hours of durable timers) runs in seconds on the Java
// time-skipping test server; activities are real (store, HTTP receiver, simulator).

describe('webhook delivery schedule (time-skipping server)', () => {
  let environment: TestWorkflowEnvironment;
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let worker: VideoWorker;
  let running: Promise<void>;
  let simulator: ReturnType<typeof buildSimulator>;
  const taskQueue = uniqueName('webhook-schedule');

  before(async () => {
    environment = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: temporalTestServerPath() } } });
    database = await testDatabase('webhook-schedule');
    simulator = buildSimulator();
    await simulator.listen({ host: '127.0.0.1', port: 0 });
    const simulatorUrl = `http://127.0.0.1:${(simulator.server.address() as AddressInfo).port}`;
    worker = await createVideoWorker({
      connection: environment.nativeConnection,
      namespace: environment.namespace ?? 'default',
      taskQueue,
      database,
      catalog: loadCatalog('config/catalog.local.json', { SIMULATOR_URL: simulatorUrl }),
      publicBaseUrl: 'http://127.0.0.1:8080',
      outboundAllowlist: 'loopback',
      webhookTimeoutMs: 2_000,
    });
    running = worker.run();
  });
  after(async () => {
    worker.shutdown();
    await running;
    await simulator.close();
    await environment.teardown();
    await database.drop();
  });

  /** Stores a task the way the api does (snapshot + hold) and runs its workflow to the end. */
  async function runTask(callbackUrl: string, withAccount?: (accountId: string) => void, whileRunning?: (handle: WorkflowHandle) => Promise<void>) {
    const accounts = new AccountStore(database.db);
    const account = await accounts.create({ name: 'hooks', balanceMicros: 1_000_000 });
    withAccount?.(account._id);
    const taskId = newId('task');
    const input: VideoTaskWorkflowInput = {
      taskId,
      accountId: account._id,
      keyId: 'key_test',
      modelId: 'seedance-2.0',
      upstream: 'simulator-seedance',
      request: { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: 'hook [sim:delay=0]', seconds: 4, ratio: '16:9', resolution: '480p', content: [] },
      holdMicros: 160_000,
      callbackUrl,
      deadlineSeconds: 3600,
      requestId: 'req_test',
    };
    const now = new Date();
    await new TaskStore(database.db).insert({
      _id: taskId, account_id: account._id, key_id: 'key_test', model: 'seedance-2.0', status: 'submitted', seconds: 4, resolution: '480p', ratio: '16:9',
      metadata: { callback_url: callbackUrl }, price_micros: 160_000, progress: 0, request_id: 'req_test', workflow_started: true, workflow_input: input,
      webhook: { url: callbackUrl, state: 'pending', attempts: [] }, created_at: now, updated_at: now,
    });
    await new Ledger(database.db).apply({ accountId: account._id, keyId: 'key_test', reference: taskId, operation: 'hold', amountMicros: 160_000 });
    const handle = await environment.client.workflow.start<typeof videoTaskWorkflow>('videoTaskWorkflow', { workflowId: taskId, taskQueue, args: [input] });
    // Time skips only while the result is awaited: until then the server's clock is moved by hand.
    await whileRunning?.(handle);
    const result = await handle.result();
    const history = await environment.client.workflow.getHandle(taskId).fetchHistory();
    const timerSeconds = (history.events ?? [])
      .map((event) => event.timerStartedEventAttributes?.startToFireTimeout?.seconds)
      .filter((seconds) => seconds !== undefined && seconds !== null)
      .map(Number);
    const task = await new TaskStore(database.db).find(taskId);
    return { result, timerSeconds, task, account, workflowId: taskId };
  }

  it('retries a receiver that keeps failing on the published schedule, then gives up (exhausted)', async () => {
    const receiver = await startWebhookReceiver([500]);
    const counted = async (outcome: string) => (await webhookAttempts.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;
    const [retriesBefore, exhaustedBefore] = [await counted('retry'), await counted('exhausted')];
    try {
      const { result, timerSeconds, task, workflowId } = await runTask(receiver.url);
      assert.equal(result.status, 'succeeded');
      assert.equal(result.webhook, 'exhausted');
      // The given-up webhook is counted apart from the retries, for an alert.
      assert.deepEqual([(await counted('retry')) - retriesBefore, (await counted('exhausted')) - exhaustedBefore], [9, 1]);
      assert.equal(receiver.received.length, WEBHOOK_RETRY_SCHEDULE_SECONDS.length);
      // Timers after the vendor polls are exactly the schedule's delays (the first attempt is immediate).
      assert.deepEqual(timerSeconds.filter((seconds) => seconds >= 5), WEBHOOK_RETRY_SCHEDULE_SECONDS.slice(1));
      assert.equal(new Set(receiver.received.map((delivery) => delivery.headers['webhook-id'])).size, 1, 'webhook-id is stable across retries');
      assert.equal(task?.webhook?.state, 'exhausted');
      assert.equal(task?.webhook?.attempts.length, 10);
      assert.ok(task?.webhook?.attempts.every((attempt) => attempt.status === 500 && attempt.outcome === 'retry'));
      await recordFetchedHistoryIfAsked(environment.client, workflowId, 'video-task-webhook-exhausted');
    } finally {
      await receiver.close();
    }
  });

  it('records a webhook whose last attempt was cut off as given up (exhausted), not pending for good', async () => {
    const counted = async () => (await webhookAttempts.get()).values.find((value) => value.labels.outcome === 'exhausted')?.value ?? 0;
    const exhaustedBefore = await counted();
    // The ninth answer takes the account away: the tenth attempt cannot read its secrets and
    // fails as a lost worker's would, recording nothing itself.
    let accountId = '';
    const receiver = await startWebhookReceiver([500], async (received) => {
      if (received === WEBHOOK_RETRY_SCHEDULE_SECONDS.length - 1) await database.db.collection('accounts').deleteOne({ _id: accountId as never });
    });
    try {
      const { result, task, workflowId } = await runTask(receiver.url, (account) => (accountId = account));
      assert.equal(result.webhook, 'exhausted');
      assert.equal(receiver.received.length, WEBHOOK_RETRY_SCHEDULE_SECONDS.length - 1);
      assert.equal(task?.webhook?.attempts.length, WEBHOOK_RETRY_SCHEDULE_SECONDS.length - 1, 'the cut-off attempt records nothing');
      assert.equal(task?.webhook?.state, 'exhausted');
      assert.equal((await counted()) - exhaustedBefore, 1, 'counted once, for the alert');
      await recordFetchedHistoryIfAsked(environment.client, workflowId, 'video-task-webhook-last-attempt-cut-off');
    } finally {
      await receiver.close();
    }
  });

  it("makes a lost attempt again in its own slot after a short pause, not the schedule's next one", async () => {
    // The first answer takes the account away: the second attempt cannot read its secrets and
    // fails, as one whose worker was killed does, sending nothing. The account is back before
    // the pause ends; the schedule's third slot would have been 5 minutes on (30, hours later on).
    let accountId = '';
    let taken: AccountDocument | null = null;
    const accounts = database.db.collection<AccountDocument>('accounts');
    const receiver = await startWebhookReceiver([500, 200], async (received) => {
      if (received === 1) taken = await accounts.findOneAndDelete({ _id: accountId });
    });
    try {
      const { result, timerSeconds, task, workflowId } = await runTask(receiver.url, (account) => (accountId = account), async (handle) => {
        for (;;) {
          if ((await handle.fetchHistory()).events?.some((event) => event.activityTaskFailedEventAttributes)) break;
          await environment.sleep(500);
        }
        await accounts.insertOne(taken!);
      });
      assert.equal(result.webhook, 'delivered');
      assert.equal(receiver.received.length, 2);
      assert.deepEqual(timerSeconds.filter((seconds) => seconds >= 5), [5, 10]);
      assert.deepEqual(task?.webhook?.attempts.map((attempt) => [attempt.attempt, attempt.status, attempt.outcome]), [[1, 500, 'retry'], [2, 200, 'delivered']]);
      await recordFetchedHistoryIfAsked(environment.client, workflowId, 'video-task-webhook-lost-attempt');
    } finally {
      await receiver.close();
    }
  });

  it('a receiver answering 500 then 200 gets the task exactly once as a success', async () => {
    const receiver = await startWebhookReceiver([500, 200]);
    try {
      const { result, task, account } = await runTask(receiver.url);
      assert.equal(result.webhook, 'delivered');
      assert.equal(receiver.received.length, 2);
      const [first, second] = receiver.received;
      assert.equal(first!.headers['webhook-id'], second!.headers['webhook-id']);
      assert.equal(first!.body, second!.body);
      const verified = new Webhook(account.webhook_secret).verify(second!.body, second!.headers as Record<string, string>) as { status: string };
      assert.equal(verified.status, 'succeeded');
      assert.deepEqual(task?.webhook?.attempts.map((attempt) => [attempt.status, attempt.outcome]), [[500, 'retry'], [200, 'delivered']]);
    } finally {
      await receiver.close();
    }
  });

  it('410 Gone stops retrying at once', async () => {
    const receiver = await startWebhookReceiver([410]);
    try {
      const { result } = await runTask(receiver.url);
      assert.equal(result.webhook, 'gone');
      assert.equal(receiver.received.length, 1);
    } finally {
      await receiver.close();
    }
  });

  it('Retry-After from the receiver stretches the next delay', async () => {
    const receiver = await startWebhookReceiver([{ status: 503, headers: { 'retry-after': '3600' } }, 200]);
    try {
      const { result, timerSeconds } = await runTask(receiver.url);
      assert.equal(result.webhook, 'delivered');
      assert.deepEqual(timerSeconds.filter((seconds) => seconds >= 5), [3600]);
    } finally {
      await receiver.close();
    }
  });
});
