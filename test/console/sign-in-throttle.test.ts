import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SignInThrottle, type AdmittedAttempt } from '../../api/console/sign-in-throttle.ts';

// The counts behind the console's 429s, on a clock of the test's own.

function throttleAt(start = 1_000_000) {
  let now = start;
  const throttle = new SignInThrottle(() => now);
  return { throttle, advance: (ms: number) => (now += ms) };
}

const admitted = (decision: ReturnType<SignInThrottle['admit']>): AdmittedAttempt => {
  assert.ok('admitted' in decision, JSON.stringify(decision));
  return decision.admitted;
};

describe('console sign-in counts', () => {
  it('counts an attempt from the moment it is let through: simultaneous guesses cannot all pass', () => {
    const { throttle } = throttleAt();
    const decisions = Array.from({ length: 18 }, () => throttle.admit({ who: 'owner@example.com', address: '203.0.113.7' }));
    assert.equal(decisions.filter((decision) => 'admitted' in decision).length, 5);
  });

  it('takes back an attempt that succeeded or was never decided', () => {
    const { throttle } = throttleAt();
    const attempt = { who: 'owner@example.com', address: '203.0.113.7' };
    for (let index = 0; index < 10; index++) throttle.takeBack(admitted(throttle.admit(attempt)));
    for (let index = 0; index < 10; index++) throttle.succeeded(admitted(throttle.admit(attempt)));
    for (let index = 0; index < 5; index++) admitted(throttle.admit(attempt));
    assert.ok('waitSeconds' in throttle.admit(attempt), 'five failures still stop the sixth');
  });

  it('keeps the owner signing in at an address they used while others fail 100 times for the email elsewhere', () => {
    const { throttle, advance } = throttleAt();
    const email = 'owner@example.com';
    throttle.succeeded(admitted(throttle.admit({ who: email, address: '198.51.100.20' })));
    advance(60_000);
    for (let address = 0; address < 20; address++) {
      for (let guess = 0; guess < 5; guess++) admitted(throttle.admit({ who: email, address: `203.0.113.${address}` }));
    }
    const elsewhere = throttle.admit({ who: email, address: '192.0.2.77' });
    assert.ok('waitSeconds' in elsewhere && elsewhere.waitSeconds > 0, 'a new address waits: the guesses were spread over many');
    throttle.succeeded(admitted(throttle.admit({ who: email, address: '198.51.100.20' })));
    // Trust lasts 30 days.
    advance(31 * 24 * 3600_000);
    for (let address = 0; address < 20; address++) {
      for (let guess = 0; guess < 5; guess++) admitted(throttle.admit({ who: email, address: `203.0.113.${address}` }));
    }
    assert.ok('waitSeconds' in throttle.admit({ who: email, address: '198.51.100.20' }), 'an address unused for 30 days is trusted no more');
  });
});
