import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../../core/errors.ts';
import { HoldAdmission } from '../../../api/services/hold-admission.ts';

// Which video submissions of one account may wait for a hold on its balance (the service's
// integration tests in test/workflows/abandoned-submission.test.ts run it against a slow ledger;
// these run it on a clock of their own).

const limits = { stalledAfterMs: 2_000, deadlineMs: 8_000 };

function refusal(attempt: () => unknown): GatewayError | undefined {
  try {
    attempt();
    return undefined;
  } catch (error) {
    assert.ok(error instanceof GatewayError);
    return error;
  }
}

/** An account's queue whose first two holds came a second apart, with `behind` more still
 * waiting: their places, and the clock after the second hold. */
function queueAtAHoldASecond(admission: HoldAdmission, behind: number) {
  let clock = 0;
  const first = admission.join('acct', clock);
  const waiting = Array.from({ length: behind + 1 }, () => admission.join('acct', clock));
  first((clock += 1_000));
  waiting[0]!((clock += 1_000));
  return { clock, waiting: waiting.slice(1) };
}

describe('hold admission', () => {
  it('joins a queue that moves, however long its oldest has waited', () => {
    const admission = new HoldAdmission(limits);
    const leaves = [0, 1, 2].map(() => admission.join('acct', 0));
    leaves[0]!(1_000);
    leaves[1]!(2_000);
    // The last still waits, 2.5 s on: the queue moved half a second ago.
    assert.equal(refusal(() => admission.join('acct', 2_500)), undefined);
  });

  it('refuses a newcomer at once when nothing got its hold for the stall limit', () => {
    const admission = new HoldAdmission(limits);
    admission.join('acct', 0);
    const refused = refusal(() => admission.join('acct', 2_100));
    assert.equal(refused?.code, 'service_unavailable');
    assert.match(refused!.message, /cannot be reserved quickly right now/);
    assert.equal(refused!.headers['retry-after'], '2', 'a 503 says when to come back');
    // Another account's queue is its own.
    assert.equal(refusal(() => admission.join('other', 2_100)), undefined);
  });

  it('tells, without joining, whether a submission would be refused at once', () => {
    const admission = new HoldAdmission(limits);
    assert.equal(refusal(() => admission.check('acct', 0)), undefined, 'no queue yet');
    const leave = admission.join('acct', 0);
    assert.equal(refusal(() => admission.check('acct', 1_000)), undefined, 'not stalled yet');
    assert.match(refusal(() => admission.check('acct', 2_100))!.message, /cannot be reserved quickly right now/);
    leave(2_200);
    // Had the checks joined, their submissions would still wait, and the queue be stalled now.
    assert.equal(refusal(() => admission.check('acct', 5_000)), undefined, 'the checks joined nothing: the queue is empty');
  });

  it('does not take holds withdrawn at their turn for holds: they tell nothing of the store\'s pace', () => {
    const admission = new HoldAdmission(limits);
    // Holds a second apart, then three whose callers were answered before their turn.
    const { clock, waiting } = queueAtAHoldASecond(admission, 5);
    for (const withdrawn of waiting.slice(0, 3)) withdrawn(clock + 10, true);
    // Two still wait, at a hold a second: six more fit in 8 s and a seventh does not. Counted as
    // holds, the withdrawals would bring the pace to a hold every 0.34 s and let 21 in.
    for (let newcomer = 0; newcomer < 6; newcomer++) assert.equal(refusal(() => admission.join('acct', clock + 20)), undefined, `newcomer ${newcomer}`);
    assert.match(refusal(() => admission.join('acct', clock + 20))!.message, /has 8 video submissions waiting/);
    // Nor do they move a stalled queue: no hold for 2 s is a stall, whatever was withdrawn.
    const stalled = new HoldAdmission(limits);
    const stuck = [0, 1].map(() => stalled.join('acct', 0));
    stuck[1]!(1_500, true);
    assert.match(refusal(() => stalled.join('acct', 2_100))!.message, /cannot be reserved quickly right now/);
  });

  it('refuses a newcomer the queue cannot bring to a hold in time, saying when one would fit', () => {
    const admission = new HoldAdmission(limits);
    const { clock } = queueAtAHoldASecond(admission, 6);
    // Six wait, a hold a second: a seventh and an eighth fit in 8 s, a ninth does not.
    assert.equal(refusal(() => admission.join('acct', clock)), undefined);
    assert.equal(refusal(() => admission.join('acct', clock)), undefined);
    const refused = refusal(() => admission.join('acct', clock));
    assert.equal(refused?.code, 'service_unavailable');
    assert.match(refused!.message, /has 8 video submissions waiting/);
    assert.equal(refused!.headers['retry-after'], '1');
  });

  it('judges a burst from an idle account by the pace of the process\'s other holds', () => {
    const admission = new HoldAdmission(limits);
    // Another account's holds came a second apart.
    let clock = 0;
    for (let hold = 0; hold < 3; hold++) admission.join('busy', clock)((clock += 1_000));
    const burst = Array.from({ length: 12 }, () => refusal(() => admission.join('idle', clock)));
    // Eight fit within the 8 s deadline at a hold a second (the first is always taken).
    assert.equal(burst.filter((refused) => refused === undefined).length, 8);
    assert.ok(burst.slice(8).every((refused) => refused?.headers['retry-after'] === '1'));
    // A minute of quiet later, that pace is forgotten.
    clock += 61_000;
    const later = Array.from({ length: 12 }, () => refusal(() => admission.join('quiet', clock)));
    assert.ok(later.every((refused) => refused === undefined));
  });

  it('always joins an empty queue, so one hold that hung does not shut the account out', () => {
    const admission = new HoldAdmission(limits);
    // A store that hung: the hold came 30 s on, long after its caller's 503.
    admission.join('acct', 0)(30_000);
    let clock = 31_000;
    for (let attempt = 0; attempt < 5; attempt++, clock += 1_000) {
      const leave = admission.join('acct', clock);
      assert.ok(leave, `attempt ${attempt} joined`);
      // The store is quick again.
      leave(clock + 50);
    }
    // The quick holds have brought the time between holds back down: a few may wait at once.
    const together = [0, 1, 2, 3].map(() => refusal(() => admission.join('acct', clock)));
    assert.deepEqual(together, [undefined, undefined, undefined, undefined]);
  });
});
