import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignInThrottle, type AdmittedAttempt } from '../../api/console/sign-in-throttle.ts';
import { SignInFailureStore } from '../../store/sign-in-failures.ts';
import { testDatabase } from '../helpers/engines.ts';

// The counts behind the console's 429s, on the real store and a clock of the test's own. Two
// throttles over one store stand for two api processes.

const admitted = (decision: Awaited<ReturnType<SignInThrottle['admit']>>): AdmittedAttempt => {
  assert.ok('admitted' in decision, JSON.stringify(decision));
  return decision.admitted;
};

describe('console sign-in counts', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('sign_in_throttle');
  });
  after(() => database.drop());

  let start = 1_000_000_000_000;
  /** Throttles over the store on one clock; each test starts a day after the last. */
  function throttlesAt(processes = 1) {
    start += 24 * 3600_000 * 40;
    let now = start;
    const throttles = Array.from({ length: processes }, () => new SignInThrottle(new SignInFailureStore(database.db), () => now));
    return { throttles, throttle: throttles[0]!, advance: (ms: number) => (now += ms) };
  }

  it('counts an attempt from the moment it is let through: of guesses made at once, at most five pass', async () => {
    const { throttle } = throttlesAt();
    const decisions = await Promise.all(Array.from({ length: 18 }, () => throttle.admit({ who: 'at-once@example.com', address: '203.0.113.7' })));
    const passed = decisions.filter((decision) => 'admitted' in decision).length;
    assert.ok(passed <= 5, `${passed} passed`);
    // One after another, exactly five.
    const { throttle: calm } = throttlesAt();
    const results = [];
    for (let guess = 0; guess < 8; guess++) results.push('admitted' in (await calm.admit({ who: 'one-by-one@example.com', address: '203.0.113.8' })));
    assert.deepEqual(results, [true, true, true, true, true, false, false, false]);
  });

  it('counts the guesses of every api process together, as they share the store', async () => {
    const { throttles, advance } = throttlesAt(3);
    const attempt = { who: 'shared@example.com', address: '203.0.113.9' };
    for (let guess = 0; guess < 5; guess++) admitted(await throttles[guess % 3]!.admit(attempt));
    for (const other of throttles) {
      const refused = await other.admit(attempt);
      assert.ok('waitSeconds' in refused, 'the sixth guess is refused whichever process gets it');
      assert.ok(refused.waitSeconds > 0 && refused.waitSeconds <= 15 * 60);
    }
    // A refused attempt is not recorded: the wait ends with the window of the first five.
    advance(15 * 60_000 + 1);
    admitted(await throttles[1]!.admit(attempt));
  });

  it('takes back an attempt that succeeded or was never decided', async () => {
    const { throttle } = throttlesAt();
    const attempt = { who: 'owner@example.com', address: '203.0.113.7' };
    for (let index = 0; index < 10; index++) await throttle.takeBack(admitted(await throttle.admit(attempt)));
    for (let index = 0; index < 10; index++) await throttle.succeeded(admitted(await throttle.admit(attempt)));
    for (let index = 0; index < 5; index++) admitted(await throttle.admit(attempt));
    assert.ok('waitSeconds' in (await throttle.admit(attempt)), 'five failures still stop the sixth');
  });

  it('keeps the owner signing in at an address they used while others fail 100 times for the email elsewhere', async () => {
    const { throttles, advance } = throttlesAt(2);
    const [throttle, other] = throttles as [SignInThrottle, SignInThrottle];
    const email = 'trusted-owner@example.com';
    await throttle.succeeded(admitted(await throttle.admit({ who: email, address: '198.51.100.20' })));
    advance(60_000);
    for (let address = 0; address < 20; address++) {
      for (let guess = 0; guess < 5; guess++) admitted(await other.admit({ who: email, address: `203.0.113.${address}` }));
    }
    const elsewhere = await throttle.admit({ who: email, address: '192.0.2.77' });
    assert.ok('waitSeconds' in elsewhere && elsewhere.waitSeconds > 0, 'a new address waits: the guesses were spread over many');
    // The trust was recorded by the first process; the second knows it too.
    await other.succeeded(admitted(await other.admit({ who: email, address: '198.51.100.20' })));
    // Trust lasts 30 days.
    advance(31 * 24 * 3600_000);
    for (let address = 0; address < 20; address++) {
      for (let guess = 0; guess < 5; guess++) admitted(await throttle.admit({ who: email, address: `203.0.113.${address}` }));
    }
    assert.ok('waitSeconds' in (await throttle.admit({ who: email, address: '198.51.100.20' })), 'an address unused for 30 days is trusted no more');
  });

  it('keeps no email or address of a failed sign-in in the store', async () => {
    const { throttle } = throttlesAt();
    admitted(await throttle.admit({ who: 'private-person@example.com', address: '203.0.113.77' }));
    const stored = JSON.stringify(await new SignInFailureStore(database.db).failures.find({}).toArray());
    assert.doesNotMatch(stored, /private-person|203\.0\.113\.77/);
  });
});
