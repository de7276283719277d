import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MongoNetworkError } from 'mongodb';
import { pino } from 'pino';
import { startProcess, waitForOutput } from '../../scripts/lib/processes.ts';
import { sdkLogger } from '../../worker/worker-log.ts';
import { testTemporalAddress, uniqueName } from '../helpers/engines.ts';

// The worker's log is JSON lines at LOG_LEVEL, the Temporal SDK's entries included: left to the
// SDK they were multi-line text (the workflow bundle's report over ~25 lines, worker states as
// objects over several) at INFO whatever LOG_LEVEL said.

async function workerOutput(logLevel: string | undefined): Promise<string> {
  const worker = startProcess('worker', process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
    env: {
      ...process.env,
      MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
      MONGODB_DB: uniqueName('worker_log'),
      TEMPORAL_ADDRESS: testTemporalAddress(),
      TEMPORAL_TASK_QUEUE: uniqueName('worker-log'),
      ...(logLevel === undefined ? {} : { LOG_LEVEL: logLevel }),
    },
  });
  try {
    await waitForOutput(worker, /worker polling/);
  } finally {
    await worker.stop();
  }
  return worker.recentOutput();
}

/** Each line of the output as JSON; fails on a line that is not. */
function entries(output: string): Array<{ level: number; msg: string; sdk?: boolean }> {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        const text = line.replace(/^\[worker\] /, '');
        // One "time": a repeated key is refused by strict log stores (Elasticsearch).
        assert.equal(text.split('"time":').length - 1, 1, `"time" not once in ${text.slice(0, 200)}`);
        return JSON.parse(text);
      } catch {
        assert.fail(`not a JSON line: ${line}`);
      }
    });
}

describe('the SDK\'s entries in the worker log', () => {
  it('passes on at INFO the warning that a worker runs activities alone, as the webhook queue\'s does, and other warnings as they are', () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const sdk = sdkLogger(log, 'INFO');
    sdk.warn('No workflows registered, not polling for workflow tasks', { taskQueue: 'q-webhooks' });
    sdk.warn('Activity failed', { taskQueue: 'q' });
    assert.deepEqual(lines.map((line) => [line.level, line.msg]), [[30, 'No workflows registered, not polling for workflow tasks'], [40, 'Activity failed']]);
  });

  it("says a failed activity's error in words: a store outage in one line, a bug with its stack", () => {
    const lines: Array<Record<string, any>> = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const sdk = sdkLogger(log, 'INFO');
    sdk.warn('Activity failed', { activityType: 'settleHold', error: new MongoNetworkError('connection timed out') });
    sdk.warn('Activity failed', { activityType: 'settleHold', error: new TypeError('a bug') });
    assert.deepEqual(lines[0]!.error, { type: 'MongoNetworkError', message: 'connection timed out', dependency: 'store' });
    assert.deepEqual([lines[1]!.error.type, lines[1]!.error.message], ['TypeError', 'a bug']);
    assert.match(lines[1]!.error.stack, /TypeError: a bug\n\s+at /);
  });
});

describe('the worker log', () => {
  it('is one JSON line per entry, the SDK\'s bundle report and state changes included', { timeout: 90_000 }, async () => {
    const lines = entries(await workerOutput(undefined));
    assert.ok(lines.some((line) => line.sdk === true && /webpack .* compiled successfully/s.test(line.msg)), 'the bundle report, as one entry');
    assert.ok(lines.some((line) => line.sdk === true && line.msg === 'Worker state changed'), 'state changes');
    assert.ok(lines.some((line) => line.level === 30 && /^worker polling task queue worker-log-/.test(line.msg)));
  });

  it('keeps to LOG_LEVEL, but always says that it polls', { timeout: 90_000 }, async () => {
    const lines = entries(await workerOutput('warn'));
    const below = lines.filter((line) => line.level < 40 && !/^worker polling/.test(line.msg));
    assert.deepEqual(below.map((line) => line.msg.slice(0, 80)), []);
    assert.ok(lines.some((line) => /^worker polling/.test(line.msg)));
  });
});
