import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BACKLOG_EVERY_MS, PRUNE_BATCH, PRUNE_EVERY_MS, TaskPruning, type SettledTaskDeletion } from '../../worker/task-pruning.ts';

// When the sweeper's retention step asks the store (test/store/task-retention.test.ts: what it
// deletes there): once an hour, every 5 minutes through a backlog, never when retention is off,
// and not again at once after a failure. The sweeper calls it every 30 s.

const DAY = 86_400_000;

/** Answers each ask with the next of `answers`, and records the cut it was asked for. */
function deletion(answers: Array<{ deleted: number; more: boolean } | Error>): SettledTaskDeletion & { asked: Array<{ before: Date; limit: number }> } {
  const asked: Array<{ before: Date; limit: number }> = [];
  return {
    asked,
    async pruneSettled(before, limit) {
      asked.push({ before, limit });
      const answer = answers.shift() ?? { deleted: 0, more: false };
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
}

describe('the retention step of the sweeper', () => {
  it('asks once an hour for the tasks settled before the retention, every 5 minutes while it finds full batches', async () => {
    const store = deletion([{ deleted: PRUNE_BATCH, more: true }, { deleted: 12, more: false }, { deleted: 0, more: false }]);
    const lines: string[] = [];
    const pruning = new TaskPruning(store, 7, (line) => lines.push(line));
    const start = Date.parse('2026-11-28T12:00:00Z');
    const at = (ms: number) => pruning.run(new Date(start + ms));
    assert.equal(await at(0), PRUNE_BATCH);
    assert.deepEqual(store.asked, [{ before: new Date(start - 7 * DAY), limit: PRUNE_BATCH }]);
    assert.match(lines[0]!, /more next in 5 minutes/);
    // Sweeps 30 s apart: the backlog's next batch waits its 5 minutes.
    for (let ms = 30_000; ms < BACKLOG_EVERY_MS; ms += 30_000) assert.equal(await at(ms), 0);
    assert.equal(await at(BACKLOG_EVERY_MS), 12);
    // The backlog is over: the next look is an hour later.
    for (let ms = BACKLOG_EVERY_MS + 30_000; ms < BACKLOG_EVERY_MS + PRUNE_EVERY_MS; ms += 30_000) assert.equal(await at(ms), 0);
    assert.equal(store.asked.length, 2);
    assert.equal(await at(BACKLOG_EVERY_MS + PRUNE_EVERY_MS), 0);
    assert.equal(store.asked.length, 3);
    assert.equal(store.asked[2]!.before.getTime(), start + BACKLOG_EVERY_MS + PRUNE_EVERY_MS - 7 * DAY);
    assert.equal(lines.length, 2, 'a round that deleted nothing says nothing');
  });

  it('never asks with retention off, and waits its hour after a failed round', async () => {
    const off = deletion([]);
    const kept = new TaskPruning(off, 0);
    for (let day = 0; day < 30; day++) assert.equal(await kept.run(new Date(day * DAY)), 0);
    assert.deepEqual(off.asked, []);

    const failing = deletion([new Error('store out of reach')]);
    const pruning = new TaskPruning(failing, 2);
    await assert.rejects(pruning.run(new Date(0)), /store out of reach/);
    assert.equal(await pruning.run(new Date(30_000)), 0);
    assert.equal(failing.asked.length, 1);
    await pruning.run(new Date(PRUNE_EVERY_MS));
    assert.equal(failing.asked.length, 2);
  });
});
