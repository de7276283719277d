import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { request } from 'undici';
import { createKey, TEST_ADMIN_TOKEN } from '../helpers/app.ts';
import { createAccountWithSignIn } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

// The console in a real browser (Debian's Chromium driven by playwright-core) in front of the
// whole stack: api, worker, Temporal, the store and the vendor simulator. A holder signs in,
// creates a key, sees it once, uses it for chat and a video task, watches usage, spend and
// the chart change, rotates the webhook secret, deletes the key and sees it refused. Every
// page is saved as a screenshot under test-artifacts/console/ for a person to look at.

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = path.resolve('test-artifacts/console');
const PASSWORD = 'browser holder password';
const PHONE = { width: 390, height: 844 };

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

async function callWithKey(baseUrl: string, key: string, route: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await request(`${baseUrl}${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.statusCode, json: await response.body.json() };
}

/** Reloads until `done` holds: chat spend is settled asynchronously, a moment after the call. */
async function reloadUntil(page: Page, done: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`page ${page.url()} never showed what was expected`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await page.reload();
  }
}

describe('console in a real browser', { timeout: 240_000 }, () => {
  let stack: VideoStack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let email: string;
  let accountId: string;
  const receiverReady = startWebhookReceiver([200]);

  before(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/provision-browser.sh as root (apt-get install chromium)`);
    mkdirSync(SCREENSHOTS, { recursive: true });
    stack = await startVideoStack('console_browser');
    email = `${uniqueName('browser')}@example.com`;
    // A long unbroken word in the name, as in a domain: the header must still fit a phone.
    accountId = (await createAccountWithSignIn(stack.app, { name: 'Browser Studio browserstudioproductionsinternationalholdings.example.com', balance_usd: 20, console_email: email, console_password: PASSWORD })).id;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.baseUrl });
    page = await context.newPage();
  });
  after(async () => {
    await browser?.close();
    await (await receiverReady).close();
    await stack?.close();
  });

  it('takes a holder from sign-in through a key, its usage and spend, the webhook secret, to the key refused', async () => {
    const receiver = await receiverReady;
    const console = (route: string) => `${stack.baseUrl}/console${route}`;

    // Sign in: a wrong password first, then the right one.
    await page.goto(console('/keys'));
    assert.equal(new URL(page.url()).pathname, '/console/sign-in', 'signed out, the console asks to sign in');
    await screenshot(page, '01-sign-in');
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', 'not the password');
    await page.click('button[type=submit]');
    assert.match(await page.textContent('.alert.error') ?? '', /not right/);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[type=submit]');
    assert.equal(new URL(page.url()).pathname, '/console/keys');
    assert.match(await page.textContent('[data-testid=balance]') ?? '', /balance \$20\.00/);
    await screenshot(page, '02-keys-empty');

    // Usage before any call: nothing spent, an empty chart.
    await page.goto(console('/usage'));
    assert.equal(await page.textContent('[data-testid=total-spend]'), '$0.00');
    assert.equal(await page.locator('[data-testid=spend-chart] rect.bar').count(), 0);
    await screenshot(page, '03-usage-before');

    // A key with a long name, older than the one the steps below use.
    await page.goto(console('/keys'));
    await page.fill('input[name=name]', `Production backend for the EU west cluster ${'and its many workers '.repeat(6)}`.trim());
    await page.click('form[action="/console/keys"] button[type=submit]');

    // Create a key: the plaintext once, with a working copy button.
    await page.goto(console('/keys'));
    await page.fill('input[name=name]', 'browser key');
    await page.click('form[action="/console/keys"] button[type=submit]');
    assert.equal(new URL(page.url()).pathname, '/console/keys/created');
    const key = await page.inputValue('[data-testid=new-key]');
    assert.match(key, /^fg_[0-9A-Za-z]{49}$/);
    assert.match(await page.textContent('.alert.warning') ?? '', /shown only this once/);
    const copy = page.locator('button[data-copy="#new-key"]');
    assert.equal(await copy.isVisible(), true, 'with JavaScript the copy button appears');
    await copy.click();
    // A locator, not waitForFunction: a string predicate is run by eval inside the page, which
    // the console's CSP (script-src 'self') refuses whenever the first check does not already
    // pass. Expressions below are strings: this project compiles without DOM types.
    await copy.filter({ hasText: /^Copied$/ }).waitFor({ timeout: 5_000 });
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), key, 'the copy button copies the key');
    await screenshot(page, '04-key-created');
    await page.reload();
    assert.ok(!(await page.content()).includes(key), 'a reload never shows the key again');
    assert.match(await page.textContent('h1') ?? '', /Key already shown/);
    await page.goto(console('/keys'));
    assert.ok(!(await page.content()).includes(key), 'nor does the list');
    assert.match(await page.textContent('tbody') ?? '', new RegExp(`browser key\\s*fg_…${key.slice(-4)}`));
    // The key with a long name (made first, above) wraps: the table fits its box, so every
    // row's actions stay on screen.
    assert.equal(await page.evaluate("(() => { const box = document.querySelector('.table-wrap'); return box.scrollWidth <= box.clientWidth; })()"), true, 'the keys table fits at 1280 px');

    // Use the key: the model list, a chat call and a video task with a webhook.
    const models = await callWithKey(stack.baseUrl, key, '/v1/models');
    assert.equal(models.status, 200);
    assert.ok(models.json.data.some((model: { id: string }) => model.id === 'gpt-4o-mini'));
    const chat = await callWithKey(stack.baseUrl, key, '/v1/chat/completions', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello to the console.' }] });
    assert.equal(chat.status, 200, JSON.stringify(chat.json));
    assert.ok(chat.json.usage.total_tokens > 0);
    const video = videoClient(stack.baseUrl, key);
    const submitted = await video.submit({ model: 'seedance-2.0', prompt: 'a lighthouse in fog [sim:delay=0.3]', seconds: '5', metadata: { resolution: '720p', callback_url: receiver.url } });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.json));
    const taskId = submitted.json.task_id as string;
    assert.equal((await video.waitForFinal(taskId)).status, 'succeeded');
    await receiver.waitFor(1);

    // Usage, spend and the chart change (chat spend settles a moment after the call).
    await page.goto(console('/usage'));
    await reloadUntil(page, async () => (await page.textContent('[data-testid=total-tokens]')) !== '0 / 0' && (await page.textContent('[data-testid=total-video-seconds]')) === '5');
    assert.equal(await page.textContent('[data-testid=total-requests]'), '2');
    assert.match(await page.textContent('[data-testid=total-tokens]') ?? '', /^\d+ \/ \d+$/);
    const spend = (await page.textContent('[data-testid=total-spend]')) ?? '';
    assert.match(spend, /^\$0\.40\d*$/, `video 5 s at 720p is $0.40, plus the chat call: ${spend}`);
    assert.notEqual(spend, '$0.40', 'the chat call costs something too');
    const today = new Date().toISOString().slice(0, 10);
    const bar = page.locator(`[data-testid=spend-chart] rect.bar[data-day="${today}"]`);
    assert.equal(await bar.count(), 1, "today's bar is drawn");
    assert.ok(Number(await bar.getAttribute('data-spend-micros')) > 400_000);
    assert.match(await page.locator(`tr[data-task-id="${taskId}"]`).textContent() ?? '', /succeeded[\s\S]*delivered\s*1 attempt/);
    assert.match((await page.textContent('[data-testid=balance]')) ?? '', /balance \$19\.59/);
    await screenshot(page, '05-usage-after');

    // The task's own page: status, clip link, the webhook attempt.
    await page.click(`a[href="/console/tasks/${taskId}"]`);
    assert.match(await page.textContent('[data-testid=webhook-attempts]') ?? '', /delivered\s*200/);
    assert.equal(await page.locator('dd a', { hasText: 'clip' }).count(), 1);
    await screenshot(page, '06-task');

    // The webhook secret: shown on demand, then rotated (both secrets sign during the grace).
    await page.goto(console('/webhooks'));
    await screenshot(page, '07-webhooks');
    await page.click('form[action="/console/webhooks/reveal"] button');
    const firstSecret = await page.inputValue('[data-testid=webhook-secret]');
    assert.match(firstSecret, /^whsec_/);
    await page.click('form[action="/console/webhooks/rotate"] button');
    assert.match(await page.textContent('.alert.success') ?? '', /New secret created/);
    assert.match(await page.textContent('main') ?? '', /Rotation in progress/);
    await page.click('form[action="/console/webhooks/reveal"] button');
    assert.notEqual(await page.inputValue('[data-testid=webhook-secret]'), firstSecret);
    await screenshot(page, '08-webhooks-rotated');

    // A phone-sized screen: the same pages, one column, tables scroll inside their box.
    const phone = await browser.newContext({ viewport: PHONE, storageState: await context.storageState(), isMobile: true, hasTouch: true });
    const phonePage = await phone.newPage();
    for (const [route, name] of [['/usage', '09-phone-usage'], ['/keys', '10-phone-keys']] as const) {
      await phonePage.goto(console(route));
      const overflow = (await phonePage.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
      assert.ok(overflow <= 1, `${route} fits a phone's width (overflow ${overflow}px)`);
      await screenshot(phonePage, name);
    }
    await phone.close();

    // Delete the key, after a confirmation; the same call is refused at once.
    await page.goto(console('/keys'));
    await page.click('a.danger-link');
    assert.match(await page.textContent('h1') ?? '', /Delete key “browser key”\?/);
    await screenshot(page, '11-revoke-confirm');
    await page.click('button.danger');
    assert.match(await page.textContent('.alert.success') ?? '', /Key deleted/);
    assert.match(await page.textContent('tbody') ?? '', /revoked/);
    await screenshot(page, '12-keys-revoked');
    const refused = await callWithKey(stack.baseUrl, key, '/v1/models');
    assert.equal(refused.status, 401);
    assert.equal(refused.json.error.type, 'authentication_error');

    // Sign out: the console asks to sign in again.
    await page.click('header form[action="/console/sign-out"] button');
    assert.equal(new URL(page.url()).pathname, '/console/sign-in');
    await page.goto(console('/keys'));
    assert.equal(new URL(page.url()).pathname, '/console/sign-in');
  });

  it('works without JavaScript for the essential flow: sign in, create a key, see it once', async () => {
    const noScript = await browser.newContext({ javaScriptEnabled: false });
    const plain = await noScript.newPage();
    await plain.goto(`${stack.baseUrl}/console/sign-in`);
    await plain.fill('input[name=email]', email);
    await plain.fill('input[name=password]', PASSWORD);
    await plain.click('button[type=submit]');
    await plain.fill('input[name=name]', 'no-js key');
    await plain.check('input[name=models][value="gpt-4o-mini"]');
    await plain.click('form[action="/console/keys"] button[type=submit]');
    const key = await plain.inputValue('[data-testid=new-key]');
    assert.match(key, /^fg_/);
    assert.equal(await plain.locator('button[data-copy]').isVisible(), false, 'no copy button that could not work');
    const models = await callWithKey(stack.baseUrl, key, '/v1/models');
    assert.deepEqual(models.json.data.map((model: { id: string }) => model.id), ['gpt-4o-mini']);
    await noScript.close();
  });

  it('lets an operator find the account, its keys and spend, set a key\'s limits, and jump to a task in the Temporal Web UI', async () => {
    const operator = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const operatorPage = await operator.newPage();
    await operatorPage.goto(`${stack.baseUrl}/console/operator/sign-in`);
    await operatorPage.fill('input[name=admin_token]', TEST_ADMIN_TOKEN);
    await operatorPage.click('button[type=submit]');
    assert.equal(new URL(operatorPage.url()).pathname, '/console/operator');
    await screenshot(operatorPage, '13-operator-accounts');
    await operatorPage.click(`tr[data-account-id="${accountId}"] a`);
    assert.match(await operatorPage.textContent('[data-testid=operator-keys]') ?? '', /browser key[\s\S]*revoked/);
    const history = await operatorPage.locator('[data-testid=tasks] a', { hasText: 'Temporal UI' }).first().getAttribute('href');
    const taskId = await operatorPage.locator('[data-testid=tasks] tr[data-task-id]').first().getAttribute('data-task-id');
    assert.equal(history, `${stack.config.TEMPORAL_UI_URL}/namespaces/default/workflows/${taskId}`);
    await operatorPage.fill('form[action$="/credits"] input[name=amount_usd]', '5');
    await operatorPage.click('form[action$="/credits"] button');
    assert.match(await operatorPage.textContent('.alert.success') ?? '', /Credits added/);
    const balance = async () => operatorPage.textContent('[data-testid=operator-balance]');
    const credited = await balance();
    await operatorPage.getByLabel('Amount to take back (USD)').fill('2');
    await operatorPage.click('form[action$="/deductions"] button');
    assert.match(await operatorPage.textContent('.alert.success') ?? '', /Credits taken back/);
    assert.equal(Number((await balance())!.replace(/[$,]/g, '')), Number(credited!.replace(/[$,]/g, '')) - 2);
    await screenshot(operatorPage, '14-operator-account');

    // A key's own rate limits, on its page (linked from the row of the one active key), and
    // that page on a phone: one column, nothing wider than the screen.
    await operatorPage.click('[data-testid=operator-keys] a[href$="/rate-limits"]');
    assert.match(await operatorPage.textContent('h1') ?? '', /Rate limits of key “no-js key”/);
    await screenshot(operatorPage, '15-operator-key-limits');
    const phone = await browser.newContext({ viewport: PHONE, storageState: await operator.storageState(), isMobile: true, hasTouch: true });
    const phonePage = await phone.newPage();
    await phonePage.goto(operatorPage.url());
    const overflow = (await phonePage.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
    assert.ok(overflow <= 1, `the key limits page fits a phone's width (overflow ${overflow}px)`);
    await screenshot(phonePage, '16-phone-operator-key-limits');
    await phone.close();
    await operatorPage.fill('input[name=requests_per_minute]', '2');
    await operatorPage.click('form[action$="/rate-limits"] button');
    assert.match(await operatorPage.textContent('.alert.success') ?? '', /Rate limits saved/);
    assert.match(await operatorPage.textContent('[data-testid=operator-keys]') ?? '', /no-js key[\s\S]*2 req\/min/);
    await operator.close();
  });

  it('lets a page on another origin call the API with a key, as pages call OpenAI (CORS)', async () => {
    const { key } = await createKey(stack.app, accountId, { name: 'browser app' });
    // The page's own origin: another port, so every call to the api is cross-origin.
    const site = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'));
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    const app = await browser.newContext();
    try {
      const tab = await app.newPage();
      await tab.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
      const seen = await tab.evaluate(
        async ({ baseUrl, key }) => {
          const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
          const models = await fetch(`${baseUrl}/v1/models`, { headers });
          // A JSON POST with a key is preflighted by the browser.
          const chat = await fetch(`${baseUrl}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }) });
          const refused = await fetch(`${baseUrl}/v1/models`, { headers: { authorization: 'Bearer fg_wrong' } });
          return {
            models: models.status,
            requestId: models.headers.get('x-request-id'),
            chat: chat.status,
            object: ((await chat.json()) as { object: string }).object,
            refused: refused.status,
            why: ((await refused.json()) as { error: { type: string } }).error.type,
          };
        },
        { baseUrl: stack.baseUrl, key },
      );
      assert.equal(seen.models, 200);
      assert.match(seen.requestId ?? '', /^req_/, 'the page can read exposed headers');
      assert.deepEqual([seen.chat, seen.object], [200, 'chat.completion']);
      assert.deepEqual([seen.refused, seen.why], [401, 'authentication_error']);
    } finally {
      await app.close();
      site.close();
    }
  });
});
