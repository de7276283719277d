import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { Webhook } from 'standardwebhooks';
import { adminHeaders, createAccount, createKey } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';
import { recordHistoryIfAsked } from '../helpers/histories.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

describe('video tasks end to end (real Temporal, store and simulator)', () => {
  let stack: VideoStack;
  before(async () => {
    stack = await startVideoStack('video-e2e');
  });
  after(() => stack.close());

  async function newCustomer(balanceUsd: number) {
    const account = await createAccount(stack.app, { name: 'video', balance_usd: balanceUsd });
    const key = await createKey(stack.app, account.id);
    return { account, key, client: videoClient(stack.baseUrl, key.key) };
  }
  const accountOf = async (id: string) => (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${id}`, headers: adminHeaders })).json();

  it('a task goes submitted → running → succeeded, downloads a real MP4, and is charged once', async () => {
    const { account, key, client } = await newCustomer(10);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'a red fox at dawn [sim:delay=1.5]', seconds: '5', metadata: { resolution: '480p', ratio: '9:16' } });
    assert.equal(submitted.status, 200);
    assert.deepEqual(Object.keys(submitted.json).sort(), ['status', 'task_id']);
    assert.equal(submitted.json.status, 'submitted');

    const held = await accountOf(account.id);
    assert.equal(held.held_usd, 0.2); // 5 s × $0.04 at 480p, held at submission
    assert.equal(held.balance_usd, 9.8);

    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
    assert.ok(task.seen.includes('running'), `statuses seen: ${task.seen}`);
    assert.equal(task.format, 'mp4');
    assert.equal(task.model, 'seedance-2.0');
    assert.equal(task.seconds, '5');
    assert.equal(task.progress, 100);
    assert.equal(task.metadata.resolution, '480p');
    assert.equal(task.metadata.ratio, '9:16');
    assert.equal(task.error, undefined);
    assert.ok(task.url?.startsWith(stack.simulatorUrl), task.url);

    const clip = await request(task.url!);
    assert.equal(clip.statusCode, 200);
    const bytes = Buffer.from(await clip.body.arrayBuffer());
    assert.equal(bytes.subarray(4, 8).toString('latin1'), 'ftyp');

    const settled = await accountOf(account.id);
    assert.deepEqual([settled.balance_usd, settled.held_usd, settled.spent_usd], [9.8, 0, 0.2]);
    await recordHistoryIfAsked(task.task_id, 'video-task-succeeded');
    const finished = stack.temporal.client.workflow.getHandle(task.task_id);
    await finished.result();
    assert.equal((await finished.query<{ currentDetails?: string }>('__temporal_workflow_metadata')).currentDetails, 'Done: task succeeded; no webhook asked for');
    const usage = await stack.database.db.collection('usage').find({ key_id: key.id }).toArray();
    assert.equal(usage.length, 1);
    assert.deepEqual([usage[0]!.video_seconds, usage[0]!.spend_micros, usage[0]!.model], [5, 200_000, 'seedance-2.0']);
  });

  it('a task the vendor accepted but holds queued reads submitted, and running once the vendor runs it', async () => {
    const { client } = await newCustomer(5);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'a long queue [sim:queue=3 delay=0.5]' });
    const taskId = submitted.json.task_id;
    const stored = () => stack.database.db.collection('tasks').findOne({ _id: taskId as never });
    const started = Date.now();
    while (!(await stored())?.vendor_task_id) {
      assert.ok(Date.now() - started < 2_500, 'the vendor never accepted the task');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const queued = await client.get(taskId);
    assert.equal(queued.status, 'submitted', 'queued at the vendor is not yet running');
    assert.equal(queued.progress, 0);
    const task = await client.waitForFinal(taskId);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
    assert.ok(task.seen.includes('running'), `statuses seen: ${task.seen}`);
    assert.ok(Date.now() - started >= 3_000, 'the task ran its queue time');
    await recordHistoryIfAsked(taskId, 'video-task-queued-then-running');
  });

  it('a vendor failure ends failed with an error and is not billed', async () => {
    const { account, client } = await newCustomer(5);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'doomed [sim:fail] [sim:delay=0.2]' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'failed');
    assert.equal(task.url, undefined);
    // The gateway's word for a moderation verdict, whatever the vendor; the vendor's own beside it.
    assert.deepEqual([task.error?.code, task.error?.vendor_code], ['content_policy_violation', 'OutputVideoSensitiveContentDetected'], JSON.stringify(task.error));
    assert.match(task.error?.message ?? '', /sensitive content/);
    await recordHistoryIfAsked(task.task_id, 'video-task-vendor-failed');
    const settled = await accountOf(account.id);
    assert.deepEqual([settled.balance_usd, settled.held_usd, settled.spent_usd], [5, 0, 0]);
  });

  it('a vendor 400 at submission fails the task at once, unbilled', async () => {
    const { account, client } = await newCustomer(5);
    const submitted = await client.submit({ model: 'seedance-1.0-pro', prompt: 'refused [sim:reject]' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'failed');
    // Not the moderation's verdict: the gateway's refusal code, the vendor's own beside it.
    assert.deepEqual([task.error?.code, task.error?.vendor_code], ['vendor_rejected', 'InvalidParameter'], JSON.stringify(task.error));
    await recordHistoryIfAsked(task.task_id, 'video-task-vendor-rejected');
    assert.deepEqual((await accountOf(account.id)).balance_usd, 5);
  });

  it('a moderation refusal at submission reads as at generation: content_policy_violation, the vendor\'s code beside it, unbilled', async () => {
    const { account, client } = await newCustomer(5);
    const submitted = await client.submit({ model: 'sora-2', prompt: 'refused by moderation [sim:reject]' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'failed');
    assert.deepEqual([task.error?.code, task.error?.vendor_code], ['content_policy_violation', 'moderation_blocked'], JSON.stringify(task.error));
    await recordHistoryIfAsked(task.task_id, 'video-task-submission-moderated');
    assert.deepEqual((await accountOf(account.id)).balance_usd, 5);
  });

  it('vendor 503s at submission are retried until the vendor accepts', async () => {
    const { client } = await newCustomer(5);
    const submitted = await client.submit({ model: 'seedance-2.0', prompt: `flaky ${Date.now()} [sim:flaky] [sim:delay=0.1]` });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
  });

  it('a create whose answer was lost is tried again under the same Idempotency-Key: the vendor runs one task, billed once', async () => {
    const simulatorTasks = async () => ((await (await request(`${stack.simulatorUrl}/_sim/stats`)).body.json()) as { video_tasks: number }).video_tasks;
    for (const model of ['seedance-2.0', 'sora-2']) {
      const { account, client } = await newCustomer(5);
      const before = await simulatorTasks();
      const submitted = await client.submit({ model, prompt: `answer lost ${Date.now()} [sim:lose_answer] [sim:delay=0.1]`, seconds: '4' });
      const task = await client.waitForFinal(submitted.json.task_id);
      assert.equal(task.status, 'succeeded', `${model}: ${JSON.stringify(task)}`);
      assert.equal((await simulatorTasks()) - before, 1, `${model}: the vendor started a second generation`);
      const settled = await accountOf(account.id);
      assert.equal(settled.held_usd, 0, model);
      assert.ok(settled.spent_usd > 0 && settled.balance_usd === 5 - settled.spent_usd, `${model}: ${JSON.stringify(settled)}`);
    }
  });

  it('sora-2 clips are streamed through the gateway with the caller\'s key, and from the console\'s clip link', async () => {
    const email = `${uniqueName('clips')}@example.com`;
    const account = await createAccountWithSignIn(stack.app, { name: 'clips', balance_usd: 5, console_email: email, console_password: 'correct horse battery staple' });
    const key = await createKey(stack.app, account.id);
    const client = videoClient(stack.baseUrl, key.key);
    const submitted = await client.submit({ model: 'sora-2', prompt: 'a paper boat [sim:delay=0.2]', seconds: '4' });
    const task = await client.waitForFinal(submitted.json.task_id);
    assert.equal(task.status, 'succeeded', JSON.stringify(task));
    assert.equal(task.url, `${stack.baseUrl}/v1/video/generations/${task.task_id}/content`);
    await recordHistoryIfAsked(task.task_id, 'video-task-gateway-content');
    const anonymous = await request(task.url!);
    assert.equal(anonymous.statusCode, 401);
    await anonymous.body.dump();
    const clip = await request(task.url!, { headers: { authorization: `Bearer ${key.key}` } });
    assert.equal(clip.statusCode, 200);
    assert.match(String(clip.headers['content-type']), /video\/mp4/);
    const whole = Buffer.from(await clip.body.arrayBuffer());
    assert.equal(whole.subarray(4, 8).toString('latin1'), 'ftyp');
    // The vendor's length and range support come through, so a player can seek and a download
    // resume: a part is a 206 with its Content-Range, HEAD the headers alone.
    assert.deepEqual([clip.headers['content-length'], clip.headers['accept-ranges']], [String(whole.length), 'bytes']);
    const part = await request(task.url!, { headers: { authorization: `Bearer ${key.key}`, range: 'bytes=4-7' } });
    assert.deepEqual([part.statusCode, part.headers['content-range'], part.headers['content-length']], [206, `bytes 4-7/${whole.length}`, '4']);
    assert.equal(Buffer.from(await part.body.arrayBuffer()).toString('latin1'), 'ftyp');
    // A download resumes with If-Range and the entity tag it got: the part when the clip is the
    // same, the whole clip when the tag names other bytes.
    assert.ok(part.headers.etag, "the vendor's entity tag comes through");
    const resumed = await request(task.url!, { headers: { authorization: `Bearer ${key.key}`, range: 'bytes=4-7', 'if-range': String(part.headers.etag) } });
    assert.equal(resumed.statusCode, 206);
    await resumed.body.dump();
    const restarted = await request(task.url!, { headers: { authorization: `Bearer ${key.key}`, range: 'bytes=4-7', 'if-range': '"another clip"' } });
    assert.deepEqual([restarted.statusCode, Buffer.from(await restarted.body.arrayBuffer()).length], [200, whole.length]);
    const head = await request(task.url!, { method: 'HEAD', headers: { authorization: `Bearer ${key.key}` } });
    assert.deepEqual([head.statusCode, head.headers['content-length'], (await head.body.arrayBuffer()).byteLength], [200, String(whole.length), 0]);
    const pastEnd = await request(task.url!, { headers: { authorization: `Bearer ${key.key}`, range: `bytes=${whole.length}-` } });
    assert.equal(pastEnd.statusCode, 416);
    assert.equal(pastEnd.headers['content-range'], `bytes */${whole.length}`);
    assert.equal(((await pastEnd.body.json()) as { error: { code: string } }).error.code, 'range_not_satisfiable');

    // A browser sends no key: the console links the clip to an address of its own.
    const holder = new ConsoleClient(stack.app);
    assert.equal((await holder.signIn(email, 'correct horse battery staple')).statusCode, 303);
    const page = await holder.get(`/console/tasks/${task.task_id}`);
    const href = /href="([^"]+)"[^>]*>clip</.exec(page.body)?.[1];
    assert.equal(href, `/console/tasks/${task.task_id}/clip`);
    const viaConsole = await holder.get(href);
    assert.equal(viaConsole.statusCode, 200, viaConsole.body.slice(0, 300));
    assert.match(String(viaConsole.headers['content-type']), /video\/mp4/);
    assert.equal(viaConsole.rawPayload.subarray(4, 8).toString('latin1'), 'ftyp');
    const consolePart = await holder.get(href, { range: 'bytes=0-7' });
    assert.deepEqual([consolePart.statusCode, consolePart.headers['content-range'], consolePart.rawPayload.length], [206, `bytes 0-7/${whole.length}`, 8]);
    const consolePastEnd = await holder.get(href, { range: `bytes=${whole.length}-` });
    assert.deepEqual([consolePastEnd.statusCode, consolePastEnd.headers['content-range']], [416, `bytes */${whole.length}`]);
    // Several ranges at once are not passed on (a multipart answer is no mp4): the whole clip.
    const ranges = await request(task.url!, { headers: { authorization: `Bearer ${key.key}`, range: 'bytes=0-1,4-7' } });
    assert.deepEqual([ranges.statusCode, ranges.headers['content-length'], ranges.headers['content-type']], [200, String(whole.length), 'video/mp4']);
    await ranges.body.dump();
    // Another holder's session cannot fetch it.
    const otherEmail = `${uniqueName('other')}@example.com`;
    await createAccountWithSignIn(stack.app, { name: 'other', balance_usd: 1, console_email: otherEmail, console_password: 'correct horse battery staple' });
    const other = new ConsoleClient(stack.app);
    await other.signIn(otherEmail, 'correct horse battery staple');
    assert.equal((await other.get(href)).statusCode, 404);
    // The operator's account page links it too.
    const operator = new ConsoleClient(stack.app);
    await operator.signInAsOperator();
    const accountPage = await operator.get(`/console/operator/accounts/${account.id}`);
    const operatorHref = /href="([^"]+)"[^>]*>clip</.exec(accountPage.body)?.[1];
    assert.equal(operatorHref, `/console/operator/accounts/${account.id}/tasks/${task.task_id}/clip`);
    assert.equal((await operator.get(operatorHref)).statusCode, 200);
  });

  it('the webhook carries byte-for-byte the GET body, signed per Standard Webhooks', async () => {
    const { account, client } = await newCustomer(5);
    const receiver = await startWebhookReceiver([200]);
    try {
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'hooked [sim:delay=0.1]', metadata: { callback_url: receiver.url } });
      const [delivery] = await receiver.waitFor(1);
      const polled = await client.getRaw(submitted.json.task_id);
      assert.equal(delivery!.body, polled.text);
      assert.equal(JSON.parse(delivery!.body).status, 'succeeded');
      assert.equal(JSON.parse(delivery!.body).metadata.callback_url, receiver.url);
      assert.equal(delivery!.headers['webhook-id'], `msg_${submitted.json.task_id}`);
      const verified = new Webhook(account.webhook_secret).verify(delivery!.body, delivery!.headers as Record<string, string>);
      assert.equal((verified as { task_id: string }).task_id, submitted.json.task_id);
      // The attempt is recorded just after the receiver answered; give that write a moment.
      let stored = await stack.database.db.collection('tasks').findOne({ _id: submitted.json.task_id });
      for (let wait = 0; wait < 100 && stored?.webhook.state !== 'delivered'; wait++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        stored = await stack.database.db.collection('tasks').findOne({ _id: submitted.json.task_id });
      }
      assert.equal(stored?.webhook.state, 'delivered');
      assert.equal(stored?.webhook.attempts.length, 1);
      assert.equal(stored?.webhook.attempts[0].status, 200);
      // The attempt ran on the webhook queue, with slots apart from holds, submissions and status
      // reads: receivers slow for many tasks at once cannot take those.
      const history = await stack.temporal.client.workflow.getHandle(submitted.json.task_id).fetchHistory();
      const queues = (history.events ?? []).flatMap((event) => {
        const scheduled = event.activityTaskScheduledEventAttributes;
        return scheduled ? [[scheduled.activityType?.name, scheduled.taskQueue?.name]] : [];
      });
      assert.deepEqual(queues.filter(([name]) => name === 'deliverTaskWebhook'), [['deliverTaskWebhook', `${stack.taskQueue}-webhooks`]]);
      assert.ok(queues.filter(([name]) => name !== 'deliverTaskWebhook').every(([, queue]) => queue === stack.taskQueue), JSON.stringify(queues));
      // Every one of them in the account's turn (test/workflows/webhook-fairness.test.ts).
      assert.equal((await stack.temporal.client.workflow.getHandle(submitted.json.task_id).describe()).priority?.fairnessKey, account.id);
      // What the Web UI shows of the closed run: its end, not its last step's "under way".
      const handle = stack.temporal.client.workflow.getHandle(submitted.json.task_id);
      await handle.result();
      assert.equal((await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata')).currentDetails, 'Done: task succeeded; webhook delivered');
      await recordHistoryIfAsked(submitted.json.task_id, 'video-task-webhook-delivered');
    } finally {
      await receiver.close();
    }
  });

  it('a failed task calls back too, with the failed task JSON', async () => {
    const { client } = await newCustomer(5);
    const receiver = await startWebhookReceiver([200]);
    try {
      const submitted = await client.submit({ model: 'seedance-2.0', prompt: 'x [sim:fail] [sim:delay=0.1]', metadata: { callback_url: receiver.url } });
      const [delivery] = await receiver.waitFor(1);
      const body = JSON.parse(delivery!.body);
      assert.equal(body.task_id, submitted.json.task_id);
      assert.equal(body.status, 'failed');
      assert.ok(body.error.message);
    } finally {
      await receiver.close();
    }
  });

  it('50 concurrent submissions against a balance for 10: 10 accepted, 40 refused, never below zero', async () => {
    // seedance-2.0 at 480p for 4 s costs $0.16; $1.60 covers exactly 10.
    const { account, client } = await newCustomer(1.6);
    const body = { model: 'seedance-2.0', prompt: 'crowd [sim:delay=0.1]', seconds: '4', metadata: { resolution: '480p' } };
    const answers = await Promise.all(Array.from({ length: 50 }, () => client.submit(body)));
    const accepted = answers.filter((answer) => answer.status === 200);
    const refused = answers.filter((answer) => answer.status === 403);
    // On a loaded machine a few may be shed with 503 before their hold (the account's holds
    // queue past STALLED_AFTER_MS, api/services/video-tasks.ts): refused too, nothing charged.
    const shed = answers.filter((answer) => answer.status === 503);
    assert.equal(accepted.length, 10);
    assert.equal(refused.length + shed.length, 40, answers.map((answer) => answer.status).join(' '));
    assert.ok(refused.length >= 20, `${refused.length} refused for the balance, ${shed.length} shed`);
    assert.ok(refused.every((answer) => answer.json.error.type === 'insufficient_quota'));
    assert.ok(shed.every((answer) => answer.json.error.code === 'service_unavailable' && /nothing was charged/.test(answer.json.error.message)));
    const during = await accountOf(account.id);
    assert.ok(during.balance_usd >= 0);
    const finals = await Promise.all(accepted.map((answer) => client.waitForFinal(answer.json.task_id)));
    assert.ok(finals.every((task) => task.status === 'succeeded'));
    const settled = await accountOf(account.id);
    assert.deepEqual([settled.balance_usd, settled.held_usd, settled.spent_usd], [0, 0, 1.6]);
  });
});
