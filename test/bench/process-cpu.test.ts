import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { processTreeCpuMs } from '../../bench/lib/process-cpu.ts';

// bench:chat reports each proxy's CPU per call from these readings: a process's own time must
// show, a worker it forked must be counted with it, and a process that is gone must read as
// unknown rather than as zero.

// A node process that starts a child burning CPU for `busyMs`, prints "done" when the child has
// burnt it, and keeps both alive until stdin closes.
const PARENT = `
const { spawn } = require('node:child_process');
const child = spawn(process.execPath, ['-e', 'const end = Date.now() + Number(process.argv[1]); while (Date.now() < end); console.log("done"); process.stdin.resume();', process.argv[1]], { stdio: ['pipe', 'pipe', 'inherit'] });
child.stdout.on('data', () => console.log('done'));
process.stdin.resume().on('end', () => child.kill());
`;

describe('processTreeCpuMs', () => {
  it('reads the time this process burns', () => {
    const before = processTreeCpuMs(process.pid);
    const end = performance.now() + 300;
    while (performance.now() < end);
    const spent = processTreeCpuMs(process.pid) - before;
    assert.ok(spent >= 200 && spent <= 2_000, `300 ms of busy loop read as ${spent} ms`);
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
