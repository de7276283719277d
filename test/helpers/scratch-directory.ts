import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

// Directories a test writes its files into (a catalog, a stack's lock), gone when the test
// file's process exits, passed or failed: each run of the suite left a few dozen behind in the
// system's temporary directory before.

const made: string[] = [];

process.once('exit', () => {
  for (const directory of made) rmSync(directory, { recursive: true, force: true });
});

/** A new empty directory named `framegate-<purpose>-…`, removed when this process exits. */
export function scratchDirectory(purpose: string): string {
  const directory = mkdtempSync(path.join(tmpdir(), `framegate-${purpose}-`));
  made.push(directory);
  return directory;
}
