import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { StoreClock } from '../../store/store-clock.ts';
import { testDatabase } from '../helpers/engines.ts';

// Lease expiry is written by one process and judged by others on the store's clock: a process
// whose own clock is wrong must still read the store's time.

describe("the store's clock, read from a process whose own clock is wrong", () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('store_clock');
  });
  after(() => database.drop());

  it('reads the store time through a local clock 90 s behind, and keeps the offset between readings', async () => {
    const behind = () => Date.now() - 90_000;
    const clock = new StoreClock(database.db, behind);
    // Before any reading it can only answer with the local clock.
    assert.ok(Math.abs(clock.now() - behind()) < 50);
    const storeNow = await clock.current();
    // The suite's store runs on this machine, so its clock is the real one.
    assert.ok(Math.abs(storeNow - Date.now()) < 250, `read ${storeNow - Date.now()} ms off the real time`);
    assert.ok(Math.abs(clock.skewMs - 90_000) < 250, `skew ${clock.skewMs} ms`);
    // Without waiting, from the offset just read.
    assert.ok(Math.abs(clock.now() - Date.now()) < 250);
  });

  it('keeps the last offset when a later reading fails', async () => {
    let elapsedMs = 0;
    const local = () => Date.now() - 90_000 + elapsedMs;
    let readings = 0;
    const flaky = { command: (command: object) => (readings++ === 0 ? database.db.command(command) : Promise.reject(new Error('store down'))) };
    const clock = new StoreClock(flaky as never, local);
    await clock.current();
    // 31 s later on the local clock: the reading is stale, and the next one fails.
    elapsedMs = 31_000;
    const storeNow = await clock.current();
    assert.equal(readings, 2, 'it tried to read again');
    assert.ok(Math.abs(storeNow - (local() + 90_000)) < 250, 'the offset of the first reading still stands');
  });

  it('refuses to answer current() with the local clock when no reading has succeeded yet', async () => {
    let storeUp = false;
    const late = { command: (command: object) => (storeUp ? database.db.command(command) : Promise.reject(new Error('store down'))) };
    const ahead = () => Date.now() + 20_000;
    const clock = new StoreClock(late as never, ahead);
    // The store's own error, which an api answers as the store's outage (503), not a bug.
    await assert.rejects(clock.current(), /store down/);
    // Asked again at once (not after 30 s): the first success is what it waits for.
    storeUp = true;
    const storeNow = await clock.current();
    assert.ok(Math.abs(storeNow - Date.now()) < 250, `read ${storeNow - Date.now()} ms off the real time`);
  });
});

describe("the store's clock, read by a process paused while its reading was on its way", () => {
  it('does not take the midpoint of a 40 s round trip for the store time', async () => {
    // One virtual time for the store and the process (their clocks agree): the store answers
    // at once, and the process is paused for 40 s before it reads the answer.
    let time = 1_800_000_000_000;
    let pauseNext = false;
    const store = {
      command: async () => {
        const answer = { localTime: new Date(time) };
        if (pauseNext) {
          pauseNext = false;
          time += 40_000;
        }
        return answer;
      },
    };
    const clock = new StoreClock(store as never, () => time);
    await clock.current();
    assert.equal(clock.skewMs, 0);
    // 31 s later the last reading is stale, and the next one is the paused one.
    time += 31_000;
    pauseNext = true;
    const storeNow = await clock.current();
    // The midpoint read the store 20 s behind: a lease that expired on the store 12 s earlier
    // still looked 8 s from its expiry, so the process spent from it and extended it.
    assert.ok(Math.abs(storeNow - time) < 1_000, `read the store ${(storeNow - time) / 1000} s off its time`);
    assert.ok(Math.abs(clock.now() - time) < 1_000, `now() ${(clock.now() - time) / 1000} s off`);
  });
});
