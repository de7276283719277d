import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatUsd } from '../../api/console/views/format.ts';
import { adminHeaders, createKey } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';
import { expectedChatMicros, startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// What an account can spend while an api process keeps part of its money leased for its next
// calls: the free balance alone read $0.00 after one chat call of a small account, in the admin
// API and on every console page (a review). Leases are kept open here for a minute, as a busy
// production api keeps them.

const PASSWORD = 'correct horse battery staple';

describe('the balance an account can spend, beside its spend leases', () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('available-balance', { SPEND_LEASE_IDLE_MS: '60000', SPEND_LEASE_SMALL_IDLE_MS: '60000', SPEND_LEASE_MAX_AGE_MS: '60000' });
  });
  after(() => stack.close());

  it('counts unspent lease money as available in the admin API and the console, and the three figures still add up', async () => {
    const email = `${uniqueName('available')}@example.com`;
    const account = await createAccountWithSignIn(stack.app, { name: 'Small Co', balance_usd: 0.5, console_email: email, console_password: PASSWORD });
    const key = (await createKey(stack.app, account.id)).key;
    const completion = await stack.client(key).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'What is left of my balance?' }], max_tokens: 50 });
    const priceMicros = expectedChatMicros(completion.usage!);
    assert.ok(priceMicros > 0);

    // The lease's journal is written about once a second: until then its call reads unspent.
    const read = async () => (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${account.id}`, headers: adminHeaders })).json();
    let view = await read();
    for (const deadline = Date.now() + 5_000; view.available_usd !== (500_000 - priceMicros) / 1e6 && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      view = await read();
    }
    assert.equal(view.available_usd, (500_000 - priceMicros) / 1e6, JSON.stringify(view));
    assert.ok(view.balance_usd < view.available_usd, `the lease holds part of the balance: ${JSON.stringify(view)}`);
    assert.ok(view.held_usd > 0);
    assert.equal(Math.round((view.balance_usd + view.held_usd + view.spent_usd) * 1e6), 500_000, 'the ledger still adds up');

    // The console shows the same: what can be spent as the balance, the call's cost as held.
    const holder = new ConsoleClient(stack.app);
    await holder.signIn(email, PASSWORD);
    const page = visibleText((await holder.get('/console/keys')).body);
    assert.match(page, new RegExp(`Small Co · balance ${formatUsd(500_000 - priceMicros).replace('$', '\\$')} \\(held ${formatUsd(priceMicros).replace('$', '\\$')} for video tasks and calls in flight\\)`));
    const operator = new ConsoleClient(stack.app, '198.51.100.90');
    await operator.signInAsOperator();
    const operatorPage = (await operator.get(`/console/operator/accounts/${account.id}`)).body;
    assert.match(operatorPage, new RegExp(`data-testid="operator-balance">${formatUsd(500_000 - priceMicros).replace('$', '\\$')}<`));
    assert.match(operatorPage, new RegExp(`data-testid="operator-held">${formatUsd(priceMicros).replace('$', '\\$')}<`));
  });
});
