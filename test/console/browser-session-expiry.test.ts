import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { createAccountWithSignIn } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// Session expiry as a real browser lives it. The inject client of the other console tests keeps
// a cookie past its Max-Age; Chromium does not. A holder whose session ran out must be told so
// on the sign-in page, not shown a bare sign-in form (and, after a form such as "Delete key"
// sent with the expired session, not left to guess whether it did anything).

const CHROMIUM = '/usr/bin/chromium';
const PASSWORD = 'expiring browser password';
const TTL_SECONDS = 2;

describe('console session expiry in a real browser', { timeout: 120_000 }, () => {
  let harness: TestApp;
  let browser: Browser;
  let baseUrl: string;

  before(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/provision-browser.sh as root (apt-get install chromium)`);
    harness = await startTestApp('console_browser_expiry', { CONSOLE_SESSION_TTL_SECONDS: String(TTL_SECONDS) });
    await harness.app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(harness.app.server.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  });
  after(async () => {
    await browser?.close();
    await harness?.close();
  });

  async function signedIn(): Promise<{ page: Page; accountId: string }> {
    const email = `${uniqueName('expiry')}@example.com`;
    const { id: accountId } = await createAccountWithSignIn(harness.app, { name: 'Expiring', balance_usd: 5, console_email: email, console_password: PASSWORD });
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${baseUrl}/console/sign-in`);
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('form[action="/console/sign-in"] button[type=submit]');
    assert.equal(new URL(page.url()).pathname, '/console/keys');
    return { page, accountId };
  }

  const expiry = () => new Promise((resolve) => setTimeout(resolve, TTL_SECONDS * 1000 + 700));

  it('says the session expired when a page is opened after it ran out, and returns to that page', async () => {
    const { page } = await signedIn();
    await expiry();
    await page.goto(`${baseUrl}/console/usage`);
    const url = new URL(page.url());
    assert.equal(url.pathname, '/console/sign-in');
    assert.equal(url.searchParams.get('next'), '/console/usage');
    assert.match(await page.locator('main').innerText(), /Your session expired/);
  });

  it('says the session expired when a form is sent after it ran out', async () => {
    const { page, accountId } = await signedIn();
    const key = await createKey(harness.app, accountId, { name: 'leaked' });
    await page.goto(`${baseUrl}/console/keys/${key.id}/revoke`);
    await expiry();
    await page.getByRole('button', { name: 'Delete key' }).click();
    assert.equal(new URL(page.url()).pathname, '/console/sign-in');
    assert.match(await page.locator('main').innerText(), /Your session expired/);
  });
});
