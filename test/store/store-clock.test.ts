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
