import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { processTreeCpuMs } from '../../bench/lib/process-cpu.ts';

// bench:chat reports each proxy's CPU per call from these readings: a process's own time must
// show, a worker it forked must be counted with it, and a process that is gone must read as
// unknown rather than as zero.

// Busy loops run until the process's own CPU clock (process.cpuUsage) has advanced, not the wall
// clock: on a loaded machine a loop of 300 ms of wall time may get a third of that on a core.

/** CPU milliseconds (user + system) this process has spent since `start`. */
function ownCpuMs(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

// A node process that starts a child burning `busyMs` of CPU, prints "done" when the child has
// burnt it, and keeps both alive until stdin closes.
const PARENT = `
const { spawn } = require('node:child_process');
const burn = 'const ms = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }; while (ms() < Number(process.argv[1])); console.log("done"); process.stdin.resume();';
const child = spawn(process.execPath, ['-e', burn, process.argv[1]], { stdio: ['pipe', 'pipe', 'inherit'] });
child.stdout.on('data', () => console.log('done'));
process.stdin.resume().on('end', () => child.kill());
`;

describe('processTreeCpuMs', () => {
  it('reads the time this process burns', () => {
    const before = processTreeCpuMs(process.pid);
    const start = process.cpuUsage();
    while (ownCpuMs(start) < 300);
    const spent = processTreeCpuMs(process.pid) - before;
    const own = ownCpuMs(start);
    // /proc counts in clock ticks (10 ms), and this process has other threads (the test runner).
    assert.ok(spent >= own - 30 && spent <= own + 200, `${own.toFixed(0)} ms of busy loop (by process.cpuUsage) read as ${spent} ms`);
  });

  it("counts a forked worker's time with its parent's", async () => {
    const parent = spawn(process.execPath, ['-e', PARENT, '400'], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const [output] = (await once(parent.stdout, 'data')) as [Buffer];
      assert.match(output.toString(), /done/);
      const tree = processTreeCpuMs(parent.pid);
      assert.ok(tree >= 300, `a tree whose worker burnt 400 ms read as ${tree} ms`);
    } finally {
      parent.stdin.end();
      await once(parent, 'exit');
    }
  });

  it('reads a process that is gone as unknown', async () => {
    const child = spawn(process.execPath, ['-e', '0']);
    await once(child, 'exit');
    assert.ok(Number.isNaN(processTreeCpuMs(child.pid)));
    assert.ok(Number.isNaN(processTreeCpuMs(undefined)));
  });
});
