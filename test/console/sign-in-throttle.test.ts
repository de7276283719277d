import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SignInThrottle, type AdmittedAttempt } from '../../api/console/sign-in-throttle.ts';
import { SignInFailureStore } from '../../store/sign-in-failures.ts';
import { testDatabase } from '../helpers/engines.ts';
import { waitUntil } from '../helpers/wait-until.ts';

// The counts behind the console's 429s, on the real store and a clock of the test's own. Two
// throttles over one store stand for two api processes.

const admitted = (decision: Awaited<ReturnType<SignInThrottle['admit']>>): AdmittedAttempt => {
  assert.ok('admitted' in decision, JSON.stringify(decision));
  return decision.admitted;
};

const digestKey = Buffer.from('a key every api process of the test shares');

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
    const throttles = Array.from({ length: processes }, () => new SignInThrottle(new SignInFailureStore(database.db, digestKey), () => now));
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

  it('keeps no email or address in the store, nor a plain hash of one that guesses could be tested against', async () => {
    const { throttle } = throttlesAt();
    const who = 'private-person@example.com';
    const address = '203.0.113.77';
    admitted(await throttle.admit({ who, address }));
    await throttle.succeeded(admitted(await throttle.admit({ who, address: '203.0.113.78' })));
    const stored = JSON.stringify([
      await database.db.collection('console_sign_in_failures').find({}).toArray(),
      await database.db.collection('console_sign_in_trust').find({}).toArray(),
    ]);
    assert.doesNotMatch(stored, /private-person|203\.0\.113\.7/);
    // Every IPv4 address, or the emails of the accounts collection, hashed plainly would give
    // these back: the digests are keyed by a secret the store does not hold.
    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    for (const name of [`\n${address}`, `${who}\n`, `${who}\n${address}`, `${who}\n203.0.113.78`]) assert.ok(!stored.includes(sha256(name)), JSON.stringify(name));
    assert.ok(stored.includes(new SignInFailureStore(database.db, digestKey).digest(`${who}\n203.0.113.78`)), 'the trust is there, under its keyed digest');
  });
  it('deletes a taken-back attempt again when the store failed to at first, so a blip counts no failure', async () => {
    class StoreFailingOneRemoval extends SignInFailureStore {
      failuresLeft = 1;
      override async remove(...args: Parameters<SignInFailureStore['remove']>): Promise<void> {
        if (this.failuresLeft-- > 0) throw new Error('store unreachable');
        return super.remove(...args);
      }
    }
    const store = new StoreFailingOneRemoval(database.db, digestKey);
    const throttle = new SignInThrottle(store, () => Date.now());
    const attempt = admitted(await throttle.admit({ who: 'blip@example.com', address: '203.0.113.90' }));
    await throttle.takeBack(attempt);
    assert.equal(await store.failures.countDocuments({ _id: attempt.id }), 1, 'the first deletion failed');
    await waitUntil(async () => (await store.failures.countDocuments({ _id: attempt.id })) === 0, 3_000);
  });
});
