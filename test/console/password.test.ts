import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { ConsoleClient, createAccountWithSignIn, visibleText } from '../helpers/console-client.ts';
import { uniqueName } from '../helpers/engines.ts';

// A holder changes their own password (a review found only the operator could): the current
// one is checked and counted as a sign-in is, the new one works at once, the old one no more,
// and every other browser is signed out while this one stays.

const PASSWORD = 'correct horse battery staple';
const NEW_PASSWORD = 'a newer password, at length';

describe('console password change', () => {
  let harness: TestApp;
  before(async () => {
    harness = await startTestApp('console_password');
  });
  after(() => harness.close());

  it('changes the password, keeps this browser signed in and signs the others out', async () => {
    const email = `${uniqueName('changer')}@example.com`;
    await createAccountWithSignIn(harness.app, { name: 'Changer', console_email: email, console_password: PASSWORD });
    const here = new ConsoleClient(harness.app, '198.51.100.31');
    const elsewhere = new ConsoleClient(harness.app, '198.51.100.32');
    assert.equal((await here.signIn(email, PASSWORD)).statusCode, 303);
    assert.equal((await elsewhere.signIn(email, PASSWORD)).statusCode, 303);

    const page = await here.get('/console/password');
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /<a href="\/console\/password" aria-current="page">Password<\/a>/);
    const refusals: Array<[Record<string, string>, number, RegExp]> = [
      [{ current_password: 'not the password', new_password: NEW_PASSWORD, repeat_password: NEW_PASSWORD }, 401, /That is not your current password\./],
      [{ current_password: PASSWORD, new_password: NEW_PASSWORD, repeat_password: `${NEW_PASSWORD}!` }, 400, /The two new passwords differ\./],
      [{ current_password: PASSWORD, new_password: 'too short', repeat_password: 'too short' }, 400, /at least 12 characters/],
    ];
    for (const [fields, status, words] of refusals) {
      await here.get('/console/password');
      const refused = await here.post('/console/password', fields);
      assert.equal(refused.statusCode, status, JSON.stringify(fields));
      assert.match(visibleText(refused.body), words);
      assert.ok(!refused.body.includes(fields.current_password!) && !refused.body.includes(fields.new_password!), 'no password is echoed');
    }
    assert.equal((await elsewhere.get('/console/keys')).statusCode, 200, 'nothing changed yet');

    await here.get('/console/password');
    const changed = await here.post('/console/password', { current_password: PASSWORD, new_password: NEW_PASSWORD, repeat_password: NEW_PASSWORD });
    assert.equal(changed.statusCode, 303);
    assert.equal(changed.headers.location, '/console/password?changed=1');
    assert.match(visibleText((await here.get('/console/password?changed=1')).body), /Password changed\. Other browsers signed in to this account are signed out\./);
    assert.equal((await here.get('/console/keys')).statusCode, 200, 'this browser stays signed in');
    const other = await elsewhere.get('/console/keys');
    assert.deepEqual([other.statusCode, other.headers.location], [303, '/console/sign-in?expired=1&next=%2Fconsole%2Fkeys']);

    assert.equal((await new ConsoleClient(harness.app, '198.51.100.33').signIn(email, PASSWORD)).statusCode, 401, 'the old password no longer signs in');
    assert.equal((await new ConsoleClient(harness.app, '198.51.100.33').signIn(email, NEW_PASSWORD)).statusCode, 303);
  });

  it('counts wrong current passwords as failed sign-ins: the sixth from an address waits', async () => {
    // A session left open in a shared browser must not become a way to guess the password.
    const email = `${uniqueName('guessed')}@example.com`;
    await createAccountWithSignIn(harness.app, { name: 'Guessed', console_email: email, console_password: PASSWORD });
    const browser = new ConsoleClient(harness.app, '198.51.100.41');
    assert.equal((await browser.signIn(email, PASSWORD)).statusCode, 303);
    const statuses: number[] = [];
    for (let index = 0; index < 6; index++) {
      await browser.get('/console/password');
      statuses.push((await browser.post('/console/password', { current_password: `guess number ${index}`, new_password: NEW_PASSWORD, repeat_password: NEW_PASSWORD })).statusCode);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429]);
    await browser.get('/console/password');
    const refused = await browser.post('/console/password', { current_password: PASSWORD, new_password: NEW_PASSWORD, repeat_password: NEW_PASSWORD });
    assert.equal(refused.statusCode, 429, 'the right password waits too');
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.match(visibleText(refused.body), /Too many failed sign-ins\. Try again in \d+ minutes?\./);
  });
});
