import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { HISTORY_FIXTURES, patchesIn } from '../helpers/histories.ts';

// Committed histories of real runs must replay against today's workflow code. A change that
// would break tasks already running (a non-deterministic edit) fails here, before it ships.

const require = createRequire(import.meta.url);
const fixtures = readdirSync(HISTORY_FIXTURES).filter((file) => file.endsWith('.json')).sort();

describe('workflow replay over committed histories', () => {
  it('has recorded histories to replay', () => {
    assert.ok(fixtures.length >= 4, `only ${fixtures.length} history fixtures`);
  });

  it('has, for every patch of the workflows, a history that took it and one from before it', () => {
    // A patch's new branch is proven only by a history that ran it, and its old one (kept for
    // tasks an older worker started) only by a history without its marker: a change to either
    // that breaks running tasks then fails the replay below.
    const patches = readdirSync('workflows').flatMap((file) => [...readFileSync(path.join('workflows', file), 'utf8').matchAll(/const \w+_PATCH = '([^']+)'/g)].map((match) => match[1]!));
    assert.ok(patches.length >= 7, `found ${patches.length} patch ids in workflows/`);
    const recorded = fixtures.map((file) => new Set(patchesIn(JSON.parse(readFileSync(path.join(HISTORY_FIXTURES, file), 'utf8')))));
    for (const patch of patches) {
      assert.ok(recorded.some((ids) => ids.has(patch)), `no history fixture took the patch '${patch}': record one (FRAMEGATE_RECORD_HISTORIES=1, README)`);
      assert.ok(recorded.some((ids) => !ids.has(patch)), `no history fixture is from before the patch '${patch}'`);
    }
  });

  it('replays every history without a determinism error', async () => {
    const histories = fixtures.map((file) => ({
      workflowId: path.basename(file, '.json'),
      history: historyFromJSON(JSON.parse(readFileSync(path.join(HISTORY_FIXTURES, file), 'utf8'))),
    }));
    const results = Worker.runReplayHistories({ workflowsPath: require.resolve('../../workflows/index.ts') }, histories);
    let replayed = 0;
    for await (const result of results) {
      assert.equal(result.error, undefined, `${result.workflowId}: ${result.error?.message}`);
      replayed++;
    }
    assert.equal(replayed, fixtures.length);
  });
});
