import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TaskStore } from '../../store/tasks.ts';
import { UsageReports } from '../../store/usage-reports.ts';
import { createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { insertUsage, taskDocument } from '../helpers/console-fixtures.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// Usage and spend per key over a date range, the spend-per-day chart and the latest video
// tasks, from usage records and task snapshots in the real store. Records may aggregate
// several requests, so every figure must be a sum of fields, never a count of records.

const PASSWORD = 'usage holder password';
const DAY_MS = 86_400_000;
const dayOffset = (days: number) => new Date(Date.now() - days * DAY_MS).toISOString().slice(0, 10);

function section(page: string, testId: string): string {
  return new RegExp(`data-testid="${testId}"[\\s\\S]*?</(table|figure)>`).exec(page)?.[0] ?? '';
}

function chartBars(page: string): Record<string, number> {
  return Object.fromEntries([...section(page, 'spend-chart').matchAll(/data-day="([^"]+)" data-spend-micros="(\d+)"/g)].map((match) => [match[1]!, Number(match[2])]));
}

describe('console usage and spend', () => {
  let harness: TestApp;
  let browser: ConsoleClient;
  let accountId: string;
  let production: { id: string };
  let staging: { id: string };
  let foreignTaskId: string;
  const [twoDaysAgo, yesterday, longAgo] = [dayOffset(2), dayOffset(1), dayOffset(60)];

  before(async () => {
    harness = await startTestApp('console_usage');
    const email = `${uniqueName('usage')}@example.com`;
    accountId = (await createAccountWithSignIn(harness.app, { name: 'Usage Co', balance_usd: 3, console_email: email, console_password: PASSWORD })).id;
    production = await createKey(harness.app, accountId, { name: 'production' });
    staging = await createKey(harness.app, accountId, { name: 'staging' });
    const other = await createAccount(harness.app, { name: 'Someone else' });
    const foreignKey = await createKey(harness.app, other.id, { name: 'foreign' });

    const db = harness.database.db;
    await insertUsage(db, [
      // One chat record standing for three requests (billing aggregates).
      { account_id: accountId, key_id: production.id, day: twoDaysAgo, kind: 'chat', requests: 3, input_tokens: 300, output_tokens: 120, spend_micros: 1_500 },
      { account_id: accountId, key_id: production.id, day: twoDaysAgo, kind: 'video', video_seconds: 5, spend_micros: 400_000 },
      { account_id: accountId, key_id: production.id, day: yesterday, kind: 'image', requests: 2, images: 2, spend_micros: 80_000 },
      { account_id: accountId, key_id: staging.id, day: yesterday, kind: 'chat', requests: 5, input_tokens: 50, output_tokens: 20, spend_micros: 700 },
      { account_id: accountId, key_id: production.id, day: longAgo, kind: 'video', video_seconds: 10, spend_micros: 999_999 },
      { account_id: other.id, key_id: foreignKey.id, day: yesterday, kind: 'video', video_seconds: 4, spend_micros: 123_456 },
    ]);

    const tasks = new TaskStore(db);
    const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000);
    await tasks.insert(taskDocument({ _id: 'task_usage_old', account_id: accountId, key_id: production.id, created_at: minutesAgo(30), updated_at: minutesAgo(29) }));
    await tasks.insert(
      taskDocument({
        _id: 'task_usage_failed',
        account_id: accountId,
        key_id: staging.id,
        status: 'failed',
        url: undefined,
        error: { code: 'vendor_failed', message: 'The vendor could not <render> this' },
        webhook: {
          url: 'https://hooks.example/video',
          state: 'pending',
          attempts: [{ attempt: 1, at: minutesAgo(9), outcome: 'retry', status: 503, error: 'HTTP 503', duration_ms: 42 }],
        },
        created_at: minutesAgo(10),
        updated_at: minutesAgo(9),
      }),
    );
    await tasks.insert(taskDocument({ _id: 'task_usage_running', account_id: accountId, key_id: production.id, status: 'running', url: undefined, progress: 40, created_at: minutesAgo(1) }));
    foreignTaskId = 'task_usage_foreign';
    await tasks.insert(taskDocument({ _id: foreignTaskId, account_id: other.id, key_id: foreignKey.id }));

    browser = new ConsoleClient(harness.app);
    await browser.signIn(email, PASSWORD);
  });
  after(() => harness.close());

  it('sums requests, tokens, seconds, images and spend per key over the last 30 days by default', async () => {
    const page = await browser.get('/console/usage');
    assert.equal(page.statusCode, 200);
    const text = visibleText(page.body);
    assert.match(text, new RegExp(`${dayOffset(29)} to ${dayOffset(0)} \\(UTC\\), all keys`));
    assert.match(text, /Spend \$0\.4822 Requests 11 Chat tokens in \/ out 350 \/ 140 Video seconds 5 Images 2/);
    const table = visibleText(section(page.body, 'usage-by-key'));
    assert.match(table, /production fg_…\S{4} 6 300 120 5 2 \$0\.4815/);
    assert.match(table, /staging fg_…\S{4} 5 50 20 0 0 \$0\.0007/);
    assert.match(table, /Total 11 350 140 5 2 \$0\.4822/);
    assert.ok(!page.body.includes('foreign') && !text.includes('$0.123456'), "another account's usage never shows");
  });

  it('draws spend per day as an inline SVG chart with one bar per day that had spend', async () => {
    const page = await browser.get('/console/usage');
    const chart = section(page.body, 'spend-chart');
    assert.match(chart, /<svg viewBox="0 0 720 220" role="img"/);
    assert.deepEqual(chartBars(page.body), { [twoDaysAgo]: 401_500, [yesterday]: 80_700 });
    assert.match(chart, new RegExp(`<title>${yesterday}: \\$0\\.0807</title>`));
    assert.match(visibleText(chart), /Total \$0\.4822 over 30 days; highest \$0\.4015 on/);
    // The same figures as a table, for those the SVG titles do not reach (keyboard, touch,
    // screen readers): one row per day with usage.
    const days = section(page.body, 'usage-by-day');
    assert.deepEqual([...days.matchAll(/<tr data-day="([^"]+)">/g)].map((match) => match[1]), [twoDaysAgo, yesterday]);
    assert.match(visibleText(days), new RegExp(`${twoDaysAgo} 4 300 120 5 0 \\$0\\.4015`));
    assert.match(visibleText(days), new RegExp(`${yesterday} 7 50 20 0 2 \\$0\\.0807`));
  });

  it('narrows to one key and to a chosen date range', async () => {
    const staged = await browser.get(`/console/usage?key=${staging.id}`);
    assert.match(visibleText(staged.body), /Spend \$0\.0007 Requests 5 /);
    assert.deepEqual(chartBars(staged.body), { [yesterday]: 700 });
    assert.ok(!visibleText(section(staged.body, 'usage-by-key')).includes('production'));
    const stagedTasks = section(staged.body, 'tasks');
    assert.ok(stagedTasks.includes('task_usage_failed') && !stagedTasks.includes('task_usage_old'), 'the task list follows the key');

    const old = await browser.get(`/console/usage?from=${longAgo}&to=${longAgo}`);
    assert.match(visibleText(old.body), /Spend \$0\.999999 Requests 1 Chat tokens in \/ out 0 \/ 0 Video seconds 10/);
    assert.deepEqual(chartBars(old.body), { [longAgo]: 999_999 });
    // The tasks listed are those of the days shown (these tasks are minutes old).
    assert.ok(!old.body.includes('data-task-id='), 'no task of another day');
    assert.match(visibleText(old.body), /No video tasks in these days\./);
  });

  it('explains a range or key it cannot use, and shows the default instead', async () => {
    const backwards = await browser.get(`/console/usage?from=${yesterday}&to=${twoDaysAgo}`);
    assert.equal(backwards.statusCode, 200);
    assert.match(visibleText(backwards.body), /The range starts after it ends; showing the last 30 days\./);
    const tooLong = await browser.get(`/console/usage?from=2020-01-01&to=${yesterday}`);
    assert.match(visibleText(tooLong.body), /Choose at most 366 days/);
    // The widest range the form takes, which the check weighs without listing its days (it
    // once listed all 3.6 million first, seconds of CPU).
    const everything = await browser.get('/console/usage?from=0000-01-01&to=9999-12-31');
    assert.match(visibleText(everything.body), /Choose at most 366 days/);
    const day = (offset: number) => new Date(Date.parse('2026-01-01T00:00:00Z') + offset * 86_400_000).toISOString().slice(0, 10);
    const longest = await browser.get(`/console/usage?from=${day(0)}&to=${day(365)}`);
    assert.doesNotMatch(visibleText(longest.body), /Choose at most/);
    const oneTooMany = await browser.get(`/console/usage?from=${day(0)}&to=${day(366)}`);
    assert.match(visibleText(oneTooMany.body), /Choose at most 366 days/);
    const notADay = await browser.get('/console/usage?from=2025-02-31');
    // The field is named, what was typed repeated (a date input cannot show it), and the message
    // tied to the field for a screen reader.
    assert.match(visibleText(notADay.body), /From: Not a date\. You typed “2025-02-31”; the page shows its default date instead\./);
    assert.match(notADay.body, /<input id="from" name="from" type="date" value="[^"]*" aria-invalid="true" aria-describedby="from-error">/);
    assert.match(notADay.body, /<p class="field-error" role="alert" id="from-error">/);
    assert.match(visibleText((await browser.get('/console/usage?to=abc')).body), /To: Use a date like 2025-01-31\. You typed “abc”/);
    // One refused field does not throw away the others: the key chosen beside it stays.
    const badDayGoodKey = await browser.get(`/console/usage?from=2025-02-31&key=${staging.id}`);
    assert.match(visibleText(badDayGoodKey.body), /Not a date\./);
    assert.match(visibleText(badDayGoodKey.body), /Spend \$0\.0007 Requests 5 /);
    const twoDays = await browser.get(`/console/usage?from=${yesterday}&from=${twoDaysAgo}`);
    assert.match(visibleText(twoDays.body), /Give one date\./);
    const foreignKey = await browser.get('/console/usage?key=key_someone_elses');
    assert.match(visibleText(foreignKey.body), /That key is not in your account; showing all keys\./);
    assert.match(visibleText(foreignKey.body), /Spend \$0\.4822/);
  });

  it('lists the latest video tasks newest first, with status, cost, clip link and webhook attempts', async () => {
    const page = await browser.get('/console/usage');
    const tasks = section(page.body, 'tasks');
    const order = [...tasks.matchAll(/data-task-id="([^"]+)"/g)].map((match) => match[1]);
    assert.deepEqual(order, ['task_usage_running', 'task_usage_failed', 'task_usage_old']);
    const text = visibleText(tasks);
    assert.match(text, /task_usage_running seedance-2\.0 production running 5 · 720p \$0\.40 held/);
    assert.match(text, /task_usage_failed seedance-2\.0 staging failed 5 · 720p not billed .* — pending 1 attempt/);
    assert.match(text, /task_usage_old seedance-2\.0 production succeeded 5 · 720p \$0\.40 .* clip none/);
    assert.match(tasks, /<a href="https:\/\/cdn\.example\/clip\.mp4" rel="noopener noreferrer">clip<\/a>/);
    assert.match(tasks, /<a href="\/console\/tasks\/task_usage_failed">/);
  });

  it('pages through every task of the days shown, 20 at a time, keeping the days and key chosen; the operator\'s page too', async () => {
    // A review submitted 24 tasks and found its two failed ones gone from the page, unsaid.
    const email = `${uniqueName('paged')}@example.com`;
    const paged = (await createAccountWithSignIn(harness.app, { name: 'Paged Co', console_email: email, console_password: PASSWORD })).id;
    const [busy, quiet] = [await createKey(harness.app, paged, { name: 'busy' }), await createKey(harness.app, paged, { name: 'quiet' })];
    const store = new TaskStore(harness.database.db);
    const newestFirst: string[] = [];
    // 45 tasks of one key, three at a time in one millisecond (the cursor breaks ties by id),
    // and one of another key in between.
    const at = Date.now() - 3_600_000;
    for (let index = 0; index < 45; index++) {
      const task = taskDocument({ _id: `task_paged_${String(index).padStart(2, '0')}`, account_id: paged, key_id: busy.id, created_at: new Date(at + Math.floor(index / 3) * 1_000) });
      await store.insert(task);
      newestFirst.unshift(task._id);
    }
    await store.insert(taskDocument({ _id: 'task_paged_quiet', account_id: paged, key_id: quiet.id, created_at: new Date(at + 30_500) }));
    const holder = new ConsoleClient(harness.app);
    await holder.signIn(email, PASSWORD);

    const walk = async (client: ConsoleClient, first: string) => {
      const seen: string[][] = [];
      const links: string[] = [];
      let url: string | undefined = first;
      while (url) {
        const page = await client.get(url);
        assert.equal(page.statusCode, 200, url);
        seen.push([...section(page.body, 'tasks').matchAll(/data-task-id="([^"]+)"/g)].map((match) => match[1]!));
        assert.equal(page.body.includes('← Newest tasks'), seen.length > 1, 'a way back to the newest from later pages');
        url = /href="([^"]+)" rel="next">Older tasks/.exec(page.body)?.[1]?.replaceAll('&amp;', '&');
        if (url) links.push(url);
      }
      return { seen, links };
    };
    const narrowed = await walk(holder, `/console/usage?from=${yesterday}&to=${dayOffset(0)}&key=${busy.id}`);
    assert.deepEqual(narrowed.seen.map((page) => page.length), [20, 20, 5]);
    assert.deepEqual(narrowed.seen.flat(), newestFirst);
    for (const link of narrowed.links) assert.match(link, new RegExp(`^/console/usage\\?from=${yesterday}&to=${dayOffset(0)}&key=${busy.id}&tasks_after=task_paged_\\d+#tasks$`));
    const all = await walk(holder, '/console/usage');
    assert.deepEqual(all.seen.map((page) => page.length), [20, 20, 6]);
    assert.equal(new Set(all.seen.flat()).size, 46);
    // Another account's task as the cursor shows nothing of it: the list starts from the newest.
    const foreign = await holder.get(`/console/usage?tasks_after=${foreignTaskId}`);
    assert.equal([...section(foreign.body, 'tasks').matchAll(/data-task-id="([^"]+)"/g)][0]?.[1], all.seen[0]![0]);

    const operator = new ConsoleClient(harness.app, '198.51.100.78');
    assert.equal((await operator.signInAsOperator()).statusCode, 303);
    const operatorPages = await walk(operator, `/console/operator/accounts/${paged}`);
    assert.deepEqual(operatorPages.seen.map((page) => page.length), [20, 20, 6]);
    assert.deepEqual(operatorPages.seen.flat(), all.seen.flat());
  });

  it("points a failed task's clip link at the task's console page, not at the API", async () => {
    const clip = await browser.get('/console/tasks/task_usage_failed/clip');
    assert.equal(clip.statusCode, 409);
    const text = visibleText(clip.body);
    assert.match(text, /The task failed, so it has no clip; see its error on its page, \/console\/tasks\/task_usage_failed\./);
    assert.doesNotMatch(text, /\/v1\//);
  });

  it("shows one task with its webhook attempts, escaped, and 404s another account's task", async () => {
    const detail = await browser.get('/console/tasks/task_usage_failed');
    assert.equal(detail.statusCode, 200);
    const text = visibleText(detail.body);
    assert.match(text, /Error vendor_failed: The vendor could not <render> this/);
    assert.ok(detail.body.includes('could not &lt;render&gt; this'));
    assert.match(text, /Not delivered yet \(it is tried again on a schedule\) to https:\/\/hooks\.example\/video : pending 1 attempt/);
    assert.match(visibleText(section(detail.body, 'webhook-attempts')), /1 \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC retry 503 42 ms HTTP 503/);
    // A task closed before it started sends no webhook: its page says so, whether its webhook
    // was left `pending` (which would promise an attempt) or ended `stopped`, as the gateway
    // closes such a task now (which would read as an operator's doing).
    const NOT_SENT = /Not sent \(the submission failed inside the gateway before the task started, so no callback is made\) to https:\/\/hooks\.example\/video : unsent 0 attempts/;
    const unstartedPage = async (id: string, state: 'pending' | 'stopped', minutesAgo: number) => {
      await new TaskStore(harness.database.db).insert(
        taskDocument({
          _id: id,
          account_id: accountId,
          key_id: production.id,
          status: 'failed',
          url: undefined,
          error: { code: 'gateway_unavailable', message: 'The task could not be stored.' },
          webhook: { url: 'https://hooks.example/video', state, attempts: [] },
          created_at: new Date(Date.now() - minutesAgo * 60_000),
        }),
      );
      return visibleText((await browser.get(`/console/tasks/${id}`)).body);
    };
    const unstarted = await unstartedPage('task_usage_unstarted', 'pending', 120);
    assert.match(unstarted, NOT_SENT);
    assert.doesNotMatch(unstarted, /tried again/);
    const closedByGateway = await unstartedPage('task_usage_unstarted_stopped', 'stopped', 121);
    assert.match(closedByGateway, NOT_SENT);
    assert.doesNotMatch(closedByGateway, /an operator/);
    const foreign = await browser.get(`/console/tasks/${foreignTaskId}`);
    assert.equal(foreign.statusCode, 404);
    assert.match(foreign.headers['content-type'] as string, /^text\/html/);
  });

  it('reports the same sums straight from the store', async () => {
    const reports = new UsageReports(harness.database.db);
    const recent = await reports.summarise({ accountId, fromDay: twoDaysAgo, toDay: yesterday });
    assert.deepEqual(recent.byKey().get(production.id), { requests: 6, input_tokens: 300, output_tokens: 120, video_seconds: 5, images: 2, spend_micros: 481_500 });
    assert.deepEqual(recent.byDay(staging.id).get(yesterday), { requests: 5, input_tokens: 50, output_tokens: 20, video_seconds: 0, images: 0, spend_micros: 700 });
    const allTime = await reports.summarise({ accountId });
    assert.equal(allTime.byKey().get(production.id)?.spend_micros, 1_481_499);
    assert.deepEqual([...allTime.byDay(production.id).keys()], [longAgo, twoDaysAgo, yesterday]);
    const oneKey = await reports.summarise({ accountId, keyId: staging.id });
    assert.deepEqual([...oneKey.byKey().keys()], [staging.id]);
  });
});
