import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { projectRoot } from '../../scripts/lib/engines.ts';

// `npm run bench:faults`, shortened, inside the suite: the stack as separate processes under a
// light steady load while the store, Temporal and the worker are each SIGKILLed and restarted.
// The bench exits non-zero on a lost task, a double charge, a charged refusal, a hung call, a
// 5xx other than 503 in the spec's body or a dead api; this test also reads the printed counts.
// It starts its own FerretDB and Temporal (it kills them), not the suite's shared ones.

function runFaultsBench(): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/faults.ts'], {
      cwd: projectRoot,
      env: {
        ...process.env,
        FAULTS_WARM_UP_SECONDS: '5',
        FAULTS_OUTAGE_SECONDS: '5',
        FAULTS_RECOVERY_SECONDS: '8',
        FAULTS_VIDEOS_PER_SECOND: '2',
        FAULTS_DRAIN_SECONDS: '240',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

function count(output: string, label: string): number {
  const match = new RegExp(`^${label}\\s+(\\d+)`, 'm').exec(output);
  assert.ok(match, `no "${label}" line in the bench output`);
  return Number(match[1]);
}

describe('the stack under faults (bench/faults.ts, shortened)', () => {
  it('loses no task, charges nothing twice and answers every outage with a quick 503', { timeout: 420_000 }, async () => {
    const { code, output } = await runFaultsBench();
    assert.equal(code, 0, `bench:faults failed:\n${output.slice(-4000)}`);
    assert.match(output, /\nPASS\n/);
    assert.ok(count(output, 'accepted') > 20, 'tasks were accepted');
    assert.equal(count(output, 'accepted'), count(output, 'succeeded') + count(output, 'failed'));
    assert.equal(count(output, 'lost'), 0);
    assert.equal(count(output, 'double-charged'), 0);
    assert.equal(count(output, 'holds never settled'), 0);
    assert.match(output, /calls: \d+, hung: 0, other 5xx: 0/);
    assert.match(output, /\/readyz unready during: store down yes, temporal down yes/);
    // The outages were real: calls during them were refused with 503.
    assert.match(output, /store down\s+\d+ × [A-Z]+ [a-z]+: The gateway cannot reach its database/);
    assert.match(output, /temporal down\s+\d+ × POST video: The task queue is unavailable/);
  });
});
