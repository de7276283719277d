import assert from 'node:assert/strict';
import { MongoNetworkError } from 'mongodb';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createWebhookActivities } from '../../activities/webhooks.ts';
import { createGuardedDispatcher, parseOutboundAllowlist } from '../../core/outbound-guard.ts';
import { AccountStore, webhookSecretsInForce } from '../../store/accounts.ts';
import { TaskStore } from '../../store/tasks.ts';
import { createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { taskDocument } from '../helpers/console-fixtures.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// The webhook secret in the console: hidden until asked for, rotatable, and during a rotation's
// grace period every delivery verifies with either secret (real deliveries to a real receiver).

const PASSWORD = 'webhook holder password';
const GRACE_SECONDS = 3600;

function headersOf(received: { headers: Record<string, unknown> }): Record<string, string> {
  return Object.fromEntries(Object.entries(received.headers).map(([name, value]) => [name, String(value)]));
}

describe('console webhook secret', () => {
  let harness: TestApp;
  let browser: ConsoleClient;
  let accountId: string;
  let originalSecret: string;
  const dispatcher = createGuardedDispatcher({ allowlist: parseOutboundAllowlist('loopback') });
  before(async () => {
    harness = await startTestApp('console_webhooks', { WEBHOOK_SECRET_GRACE_SECONDS: String(GRACE_SECONDS) });
    const email = `${uniqueName('hooks')}@example.com`;
    const account = await createAccountWithSignIn(harness.app, { name: 'Hooks Ltd', console_email: email, console_password: PASSWORD });
    accountId = account.id;
    originalSecret = account.webhook_secret;
    browser = new ConsoleClient(harness.app);
    await browser.signIn(email, PASSWORD);
  });
  after(async () => {
    await dispatcher.close();
    await harness.close();
  });

  it('shows the secret masked until it is asked for with a POST carrying the CSRF token', async () => {
    const page = await browser.get('/console/webhooks');
    assert.equal(page.statusCode, 200);
    assert.ok(!page.body.includes(originalSecret), 'the secret is not on the page');
    assert.match(visibleText(page.body), new RegExp(`whsec_…${originalSecret.slice(-4).replace(/[+/=]/g, '\\$&')}`));
    const refused = await browser.post('/console/webhooks/reveal', {}, { csrf: false });
    assert.equal(refused.statusCode, 403);
    assert.ok(!refused.body.includes(originalSecret));
    const revealed = await browser.post('/console/webhooks/reveal', {}, { csrf: await browser.csrfToken('/console/webhooks') });
    assert.equal(revealed.statusCode, 200);
    assert.ok(revealed.body.includes(`value="${originalSecret}"`));
    assert.equal(revealed.headers['cache-control'], 'no-store');
  });

  it('rotates: a new secret at once, the previous one in force for the grace period, and a reload rotates nothing', async () => {
    const startedAt = Date.now();
    await browser.get('/console/webhooks');
    const rotated = await browser.post('/console/webhooks/rotate', {});
    assert.equal(rotated.statusCode, 303);
    assert.equal(rotated.headers.location, '/console/webhooks?notice=rotated');
    const account = (await new AccountStore(harness.database.db).find(accountId))!;
    assert.notEqual(account.webhook_secret, originalSecret);
    assert.equal(account.previous_webhook_secrets?.[0]?.secret, originalSecret);
    const expiresIn = account.previous_webhook_secrets![0]!.expires_at.getTime() - startedAt;
    assert.ok(expiresIn >= GRACE_SECONDS * 1000 - 1000 && expiresIn <= GRACE_SECONDS * 1000 + 5000, `grace ${expiresIn} ms`);
    assert.deepEqual(webhookSecretsInForce(account), [account.webhook_secret, originalSecret]);

    const page = await browser.get('/console/webhooks?notice=rotated');
    assert.match(visibleText(page.body), /New secret created\./);
    assert.match(visibleText(page.body), /Rotation in progress: deliveries are also signed with the earlier secret/);
    assert.equal((await new AccountStore(harness.database.db).find(accountId))!.webhook_secret, account.webhook_secret, 'showing the page again rotates nothing');
    const revealed = await browser.post('/console/webhooks/reveal', {});
    assert.ok(revealed.body.includes(`value="${account.webhook_secret}"`));
  });

  it('keeps every earlier secret signing for its own grace period when rotated again within it', async () => {
    const accounts = new AccountStore(harness.database.db);
    const first = await accounts.create({ name: 'twice rotated', balanceMicros: 0 });
    const once = (await accounts.rotateWebhookSecret(first._id, 3_600))!;
    const twice = (await accounts.rotateWebhookSecret(first._id, 3_600))!;
    assert.deepEqual(webhookSecretsInForce(twice), [twice.webhook_secret, once.webhook_secret, first.webhook_secret]);
    // An hour later both earlier ones have expired.
    assert.deepEqual(webhookSecretsInForce(twice, new Date(Date.now() + 3_601_000)), [twice.webhook_secret]);
    // A store from before kept one previous secret in two fields: it still signs, and the next
    // rotation carries it over.
    await accounts.collection.updateOne({ _id: first._id }, { $unset: { previous_webhook_secrets: '' }, $set: { previous_webhook_secret: once.webhook_secret, previous_webhook_secret_expires_at: new Date(Date.now() + 60_000) } });
    const legacy = (await accounts.find(first._id))!;
    assert.deepEqual(webhookSecretsInForce(legacy), [twice.webhook_secret, once.webhook_secret]);
    const after = (await accounts.rotateWebhookSecret(first._id, 3_600))!;
    assert.deepEqual(webhookSecretsInForce(after), [after.webhook_secret, twice.webhook_secret, once.webhook_secret]);
    assert.equal(after.previous_webhook_secret, undefined);
  });

  /** A task of the account, under a new key named `keyName`, whose webhook goes to `url`. */
  async function storedTaskWithWebhook(tasks: TaskStore, keyName: string, url: string) {
    const key = await createKey(harness.app, accountId, { name: keyName });
    const task = taskDocument({ account_id: accountId, key_id: key.id, webhook: { url, state: 'pending', attempts: [] } });
    await tasks.insert(task);
    return task;
  }

  it('reports a delivered webhook as delivered even when the store will not take its record', async () => {
    class TasksRefusingRecords extends TaskStore {
      refused = 0;
      override async recordWebhookAttempt(): Promise<never> {
        this.refused++;
        throw new Error('store unreachable (simulated)');
      }
    }
    const tasks = new TasksRefusingRecords(harness.database.db);
    const receiver = await startWebhookReceiver([200]);
    try {
      const task = await storedTaskWithWebhook(tasks, 'unrecorded', receiver.url);
      const warnings: string[] = [];
      const activities = createWebhookActivities({ tasks, accounts: new AccountStore(harness.database.db), dispatcher, publicBaseUrl: 'http://127.0.0.1:8080', warn: (message) => warnings.push(message) });
      // Not a thrown activity, which the workflow would count as a failed attempt to send again.
      assert.equal((await activities.deliverTaskWebhook({ taskId: task._id, attempt: 1, lastAttempt: false })).outcome, 'delivered');
      assert.equal(receiver.received.length, 1);
      assert.equal(tasks.refused, 3, 'the record was tried three times');
      assert.deepEqual(warnings, ['could not record a webhook attempt; the delivery stands']);
    } finally {
      await receiver.close();
    }
  });

  it('reads through a store blip before an attempt, instead of failing the attempt unsent; an outage longer than that still fails it', async () => {
    // A store paused for 12 s had the attempt fail before it sent anything, and the next slot of
    // the schedule came 5 minutes later (an outage review).
    class TasksBackAfter extends TaskStore {
      failures = 0;
      constructor(
        db: ConstructorParameters<typeof TaskStore>[0],
        private readonly failFor: number,
      ) {
        super(db);
      }
      override async find(taskId: string) {
        if (this.failures < this.failFor) {
          this.failures++;
          throw new MongoNetworkError('store unreachable (simulated)');
        }
        return super.find(taskId);
      }
    }
    class AccountsBackAfterOne extends AccountStore {
      failed = false;
      override async find(id: string) {
        if (!this.failed) {
          this.failed = true;
          throw new MongoNetworkError('store unreachable (simulated)');
        }
        return super.find(id);
      }
    }
    const receiver = await startWebhookReceiver([200]);
    try {
      const blip = new TasksBackAfter(harness.database.db, 3);
      const task = await storedTaskWithWebhook(blip, 'blip', receiver.url);
      const activities = createWebhookActivities({ tasks: blip, accounts: new AccountsBackAfterOne(harness.database.db), dispatcher, publicBaseUrl: 'http://127.0.0.1:8080' });
      assert.equal((await activities.deliverTaskWebhook({ taskId: task._id, attempt: 1, lastAttempt: false })).outcome, 'delivered');
      assert.equal(blip.failures, 3);
      assert.equal(receiver.received.length, 1);
      assert.equal((await blip.find(task._id))!.webhook!.state, 'delivered');

      const outage = new TasksBackAfter(harness.database.db, Number.POSITIVE_INFINITY);
      const shortBudget = createWebhookActivities({ tasks: outage, accounts: new AccountStore(harness.database.db), dispatcher, publicBaseUrl: 'http://127.0.0.1:8080', readRetryForMs: 1_000 });
      const started = Date.now();
      await assert.rejects(shortBudget.deliverTaskWebhook({ taskId: task._id, attempt: 2, lastAttempt: false }), /store unreachable/);
      assert.ok(Date.now() - started < 3_000 && outage.failures >= 3, `${outage.failures} tries in ${Date.now() - started} ms`);
      assert.equal(receiver.received.length, 1, 'nothing sent without the task');

      // Any other failure (a bug) is not an outage to wait out.
      class TasksBroken extends TaskStore {
        tries = 0;
        override async find(): Promise<never> {
          this.tries++;
          throw new TypeError('a bug (simulated)');
        }
      }
      const broken = new TasksBroken(harness.database.db);
      const withBug = createWebhookActivities({ tasks: broken, accounts: new AccountStore(harness.database.db), dispatcher, publicBaseUrl: 'http://127.0.0.1:8080' });
      await assert.rejects(withBug.deliverTaskWebhook({ taskId: task._id, attempt: 3, lastAttempt: false }), /a bug/);
      assert.equal(broken.tries, 1);
    } finally {
      await receiver.close();
    }
  });

  it('records an attempt at the time it was sent, not when its timeout ended it', async () => {
    const tasks = new TaskStore(harness.database.db);
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const task = await storedTaskWithWebhook(tasks, 'silent', `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hook`);
      const activities = createWebhookActivities({ tasks, accounts: new AccountStore(harness.database.db), dispatcher, publicBaseUrl: 'http://127.0.0.1:8080', timeoutMs: 600 });
      const sentAfter = Date.now();
      assert.equal((await activities.deliverTaskWebhook({ taskId: task._id, attempt: 1, lastAttempt: false })).outcome, 'retry');
      const [attempt] = (await tasks.find(task._id))!.webhook!.attempts;
      assert.ok(attempt!.at.getTime() - sentAfter < 300, `recorded ${attempt!.at.getTime() - sentAfter} ms after the send began`);
      assert.ok(attempt!.duration_ms >= 550, `lasted ${attempt!.duration_ms} ms`);
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('signs deliveries with both secrets during the grace period, and with the new one alone after it', async () => {
    const accounts = new AccountStore(harness.database.db);
    const tasks = new TaskStore(harness.database.db);
    const receiver = await startWebhookReceiver([200]);
    try {
      const task = await storedTaskWithWebhook(tasks, 'hooks', receiver.url);
      const activities = createWebhookActivities({ tasks, accounts, dispatcher, publicBaseUrl: 'http://127.0.0.1:8080' });
      const current = (await accounts.find(accountId))!.webhook_secret;

      assert.equal((await activities.deliverTaskWebhook({ taskId: task._id, attempt: 1, lastAttempt: false })).outcome, 'delivered');
      const [during] = await receiver.waitFor(1);
      assert.equal(String(during!.headers['webhook-signature']).split(' ').length, 2);
      for (const secret of [current, originalSecret]) {
        assert.equal((new Webhook(secret).verify(during!.body, headersOf(during!)) as { task_id: string }).task_id, task._id);
      }

      // The grace period is over: only the new secret signs.
      await accounts.collection.updateOne({ _id: accountId }, { $set: { 'previous_webhook_secrets.0.expires_at': new Date(Date.now() - 1000) } });
      await activities.deliverTaskWebhook({ taskId: task._id, attempt: 2, lastAttempt: false });
      const afterGrace = (await receiver.waitFor(2))[1]!;
      assert.equal(String(afterGrace.headers['webhook-signature']).split(' ').length, 1);
      assert.ok(new Webhook(current).verify(afterGrace.body, headersOf(afterGrace)));
      assert.throws(() => new Webhook(originalSecret).verify(afterGrace.body, headersOf(afterGrace)));
      assert.ok(!visibleText((await browser.get('/console/webhooks')).body).includes('Rotation in progress'));

      // Both attempts are on the task's console page.
      const detail = await browser.get(`/console/tasks/${task._id}`);
      assert.equal(detail.statusCode, 200);
      const attempts = /<table data-testid="webhook-attempts">[\s\S]*?<\/table>/.exec(detail.body)?.[0] ?? '';
      assert.equal((attempts.match(/badge delivered/g) ?? []).length, 2);
      assert.match(visibleText(attempts), /1 \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC delivered 200/);
    } finally {
      await receiver.close();
    }
  });

  it('stops earlier secrets at once when asked (one leaked): only the current one signs', async () => {
    await browser.get('/console/webhooks');
    assert.equal((await browser.post('/console/webhooks/rotate', {})).statusCode, 303);
    const page = await browser.get('/console/webhooks?notice=rotated');
    assert.match(visibleText(page.body), /Stop earlier secrets now/);
    const retired = await browser.post('/console/webhooks/retire-earlier', {});
    assert.deepEqual([retired.statusCode, retired.headers.location], [303, '/console/webhooks?notice=retired']);
    const account = (await new AccountStore(harness.database.db).find(accountId))!;
    assert.deepEqual(webhookSecretsInForce(account), [account.webhook_secret]);
    const after = visibleText((await browser.get('/console/webhooks?notice=retired')).body);
    assert.match(after, /Earlier secrets no longer sign/);
    assert.doesNotMatch(after, /Rotation in progress/);
    assert.equal((await browser.post('/console/webhooks/retire-earlier', {}, { csrf: false })).statusCode, 403);
  });
});
