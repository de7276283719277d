import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatUsd } from '../../api/console/views/format.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// A holder whose balance no longer covers the cheapest video task is told so on every page:
// before, only the API's 403s said it (console review).

const PASSWORD = 'correct horse battery staple';

describe('console low-balance warning', () => {
  let harness: TestApp;
  // In config/catalog.local.json: seedance-1.0-pro, 5 s at 480p (seedance-2.0's 4 s at 480p is $0.16).
  const cheapest = 150_000;
  before(async () => {
    harness = await startTestApp('console_low_balance');
  });
  after(() => harness.close());

  async function holderWith(balanceMicros: number): Promise<ConsoleClient> {
    const email = `${uniqueName('low')}@example.com`;
    await createAccountWithSignIn(harness.app, { name: 'Low', balance_usd: balanceMicros / 1e6, console_email: email, console_password: PASSWORD });
    const browser = new ConsoleClient(harness.app);
    assert.equal((await browser.signIn(email, PASSWORD)).statusCode, 303);
    return browser;
  }

  it('warns below the cheapest video task, on every page, and not at or above it', async () => {
    const short = await holderWith(cheapest - 1);
    for (const page of ['/console/keys', '/console/usage', '/console/webhooks', '/console/password']) {
      const text = visibleText((await short.get(page)).body);
      assert.ok(text.includes(`The balance (${formatUsd(cheapest - 1)}) is below the price of the cheapest video task (${formatUsd(cheapest)})`), `${page}: ${text.slice(0, 400)}`);
    }
    const enough = await holderWith(cheapest);
    assert.ok(!visibleText((await enough.get('/console/keys')).body).includes('below the price of the cheapest video task'));
  });
});
