import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { startProcess } from '../../scripts/lib/processes.ts';

// Benchmarks start the processes under test with `logFile`, so their output never passes
// through the load generator's event loop; error reports must still show it.
test('a process started with logFile writes stdout and stderr to the file, and recentOutput reads it back', async (t) => {
  const directory = mkdtempSync(path.join(tmpdir(), 'framegate-log-file-'));
  t.after(() => rmSync(directory, { recursive: true, force: true }));
  const file = path.join(directory, 'child.log');
  const child = startProcess('child', process.execPath, ['-e', "console.log('to stdout'); console.error('to stderr'); process.stdout.write('x'.repeat(20000) + '\\nlast line\\n')"], { logFile: file });
  assert.equal(child.child.stdout, null, 'no pipe for us to read');
  assert.equal(await child.exited, 0);
  const written = readFileSync(file, 'utf8');
  assert.match(written, /^to stdout\n/);
  assert.match(written, /to stderr\n/);
  assert.match(written, /last line\n$/);
  // Only the tail is kept for reports: the end of the file, not its start.
  const recent = child.recentOutput();
  assert.match(recent, /last line\n$/);
  assert.ok(recent.length <= 16_384, `recentOutput returned ${recent.length} characters`);
  assert.doesNotMatch(recent, /to stdout/);
});
