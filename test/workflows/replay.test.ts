import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { PATCHES } from '../../workflows/patches.ts';
import { HISTORY_FIXTURES, patchesIn } from '../helpers/histories.ts';

// Committed histories of real runs must replay against today's workflow code. A change that
// would break tasks already running (a non-deterministic edit) fails here, before it ships.

const require = createRequire(import.meta.url);
const fixtures = readdirSync(HISTORY_FIXTURES).filter((file) => file.endsWith('.json')).sort();

describe('workflow replay over committed histories', () => {
  it('has recorded histories to replay', () => {
    assert.ok(fixtures.length >= 4, `only ${fixtures.length} history fixtures`);
  });

  it('finds every patch of the workflows named in workflows/patches.ts', () => {
    const sources = readdirSync('workflows', { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'));
    for (const file of sources) {
      for (const call of readFileSync(path.join('workflows', file), 'utf8').matchAll(/\b(?:patched|deprecatePatch)\(([^)]+)\)/g)) {
        assert.match(call[1]!, /^PATCHES\.\w+$/, `${file}: ${call[0]} names its id outside workflows/patches.ts`);
      }
    }
  });

  it('has, for every patch of the workflows, a history that took it and one from before it', () => {
    // A patch's new branch is proven only by a history that ran it, and its old one (kept for
    // tasks an older worker started) only by a history without its marker: a change to either
    // that breaks running tasks then fails the replay below.
    const patches = Object.values(PATCHES);
    const recorded = fixtures.map((file) => new Set(patchesIn(JSON.parse(readFileSync(path.join(HISTORY_FIXTURES, file), 'utf8')))));
    for (const patch of patches) {
      assert.ok(recorded.some((ids) => ids.has(patch)), `no history fixture took the patch '${patch}': record one (FRAMEGATE_RECORD_HISTORIES=1, README)`);
      assert.ok(recorded.some((ids) => !ids.has(patch)), `no history fixture is from before the patch '${patch}'`);
    }
  });

  it('has histories of a cancel during the vendor submission: an attempt under way, and a retry cut short', () => {
    // How the submission ended once the cancel asked it to: an attempt under way runs on and
    // completes (its job then cancelled at the vendor); a retry waiting its turn is cancelled.
    const endings = new Set<string>();
    for (const file of fixtures) {
      const history = JSON.parse(readFileSync(path.join(HISTORY_FIXTURES, file), 'utf8')) as Parameters<typeof patchesIn>[0];
      if (!patchesIn(history).includes(PATCHES.cancelWaitsForSubmission)) continue;
      const events = history.events ?? [];
      const asked = events.findIndex((event) => event.eventType === 'EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED');
      const ended = asked === -1 ? undefined : events.slice(asked).find((event) => /^EVENT_TYPE_ACTIVITY_TASK_(COMPLETED|CANCELED|FAILED|TIMED_OUT)$/.test(event.eventType ?? ''));
      if (ended?.eventType) endings.add(ended.eventType);
    }
    assert.ok(endings.has('EVENT_TYPE_ACTIVITY_TASK_COMPLETED'), `no history of an attempt under way that made its job (${[...endings].join(', ')})`);
    assert.ok(endings.has('EVENT_TYPE_ACTIVITY_TASK_CANCELED'), `no history of a retry cut short (${[...endings].join(', ')})`);
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
