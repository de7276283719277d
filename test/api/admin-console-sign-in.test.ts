import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { verifyPassword } from '../../core/passwords.ts';
import { adminHeaders, startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// POST /admin/accounts may set up the holder's web console sign-in; without the two new fields
// it behaves exactly as before.

describe('admin API: console sign-in for a new account', () => {
  let harness: TestApp;
  before(async () => {
    harness = await startTestApp('admin_console_sign_in');
  });
  after(() => harness.close());

  const create = (payload: Record<string, unknown>) => harness.app.inject({ method: 'POST', url: '/admin/accounts', headers: adminHeaders, payload });

  it('creates the account with a sign-in whose password is stored only as a scrypt hash', async () => {
    const email = `${uniqueName('Holder')}@Example.com`;
    const response = await create({ name: 'With console', balance_usd: 2, console_email: ` ${email} `, console_password: 'twelve chars at least' });
    assert.equal(response.statusCode, 201);
    const account = response.json();
    assert.deepEqual(Object.keys(account).sort(), ['available_usd', 'balance_usd', 'created_at', 'held_usd', 'id', 'name', 'spent_usd', 'webhook_secret'], 'the answer keeps its shape');
    const credential = await harness.database.db.collection('console_credentials').findOne({ _id: email.toLowerCase() as never });
    assert.equal(credential?.account_id, account.id);
    assert.ok(!JSON.stringify(credential).includes('twelve chars at least'));
    assert.equal(await verifyPassword('twelve chars at least', credential!.password_hash), true);
    const browser = new ConsoleClient(harness.app);
    assert.equal((await browser.signIn(email, 'twelve chars at least')).headers.location, '/console/keys');
  });

  it('refuses half a sign-in, a short password and a malformed email (400 naming the field), creating nothing', async () => {
    const before = await harness.database.db.collection('accounts').countDocuments({});
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ name: 'a', console_email: 'a@example.com' }, 'console_password'],
      [{ name: 'a', console_password: 'twelve chars at least' }, 'console_password'],
      [{ name: 'a', console_email: 'a@example.com', console_password: 'short' }, 'console_password'],
      [{ name: 'a', console_email: 'not an email', console_password: 'twelve chars at least' }, 'console_email'],
    ];
    for (const [payload, field] of cases) {
      const response = await create(payload);
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
      assert.equal(response.json().error.param, field, JSON.stringify(payload));
    }
    assert.equal(await harness.database.db.collection('accounts').countDocuments({}), before);
  });

  it('answers 409 for an email that already signs in to another account, and creates no account', async () => {
    const email = `${uniqueName('taken')}@example.com`;
    assert.equal((await create({ name: 'First', console_email: email, console_password: 'twelve chars at least' })).statusCode, 201);
    const before = await harness.database.db.collection('accounts').countDocuments({});
    const second = await create({ name: 'Second', console_email: email.toUpperCase(), console_password: 'another long password' });
    assert.equal(second.statusCode, 409);
    assert.equal(second.json().error.code, 'conflict');
    assert.equal(second.json().error.param, 'console_email');
    assert.equal(await harness.database.db.collection('accounts').countDocuments({}), before);
  });

  it('still creates accounts without a sign-in, as before', async () => {
    const response = await create({ name: 'Plain', balance_usd: 1 });
    assert.equal(response.statusCode, 201);
    assert.equal(await harness.database.db.collection('console_credentials').countDocuments({ account_id: response.json().id }), 0);
  });
});
