import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess, waitForPort, type ManagedProcess, type StartOptions } from './processes.ts';

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const toolPaths = {
  temporal: path.join(projectRoot, '.tools/venv/bin/temporal'),
  temporalTestServer: path.join(projectRoot, '.tools/venv/bin/temporal-test-server'),
  ferretdb: path.join(projectRoot, '.tools/bin/ferretdb'),
};

/** Installs the engines into .tools/ (cached); `browser` adds Debian's Chromium, for the
 * console's browser test only (a system package: installed where root and apt-get allow). */
export function provision(options: { browser?: boolean } = {}): void {
  const scripts = ['scripts/provision.sh', ...(options.browser ? ['scripts/provision-browser.sh'] : [])];
  for (const script of scripts) {
    const result = spawnSync('bash', [path.join(projectRoot, script)], { stdio: 'inherit' });
    if (result.status !== 0) {
      process.stderr.write('framegate: provisioning failed (see the messages above).\n');
      process.exit(result.status ?? 1);
    }
  }
}

/** `binary` runs another FerretDB build than the provisioned one (bench/store-by-id.ts compares). */
export async function startFerretDb(options: { port: number; dataDir: string; output?: StartOptions['output']; ownProcessGroup?: boolean; binary?: string }): Promise<ManagedProcess> {
  mkdirSync(options.dataDir, { recursive: true });
  const ferretdb = startProcess(
    'ferretdb',
    options.binary ?? toolPaths.ferretdb,
    [
      '--handler=sqlite',
      // BEGIN IMMEDIATE: a writer waits for the lock (busy_timeout) instead of failing with
      // SQLITE_BUSY when its read transaction cannot be upgraded under concurrent writes.
      // synchronous(normal): with WAL, a commit no longer waits for fsync (1.7-2.6x the insert
      // rate here); a killed process loses nothing, only an OS crash may lose the last commits,
      // which is the right trade for a local development store.
      `--sqlite-url=file:${options.dataDir}/?_txlock=immediate&_pragma=synchronous(normal)`,
      `--state-dir=${options.dataDir}`,
      `--listen-addr=127.0.0.1:${options.port}`,
      '--debug-addr=-',
      '--telemetry=disable',
      '--log-level=warn',
    ],
    { output: options.output ?? 'quiet', ownProcessGroup: options.ownProcessGroup ?? false },
  );
  await waitForPort('127.0.0.1', options.port, ferretdb);
  return ferretdb;
}

export async function startTemporalDevServer(options: {
  port: number;
  uiPort?: number;
  dbFile?: string;
  output?: StartOptions['output'];
  ownProcessGroup?: boolean;
  /** One partition per task queue (tests; see below). */
  onePartition?: boolean;
}): Promise<ManagedProcess> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(options.port), '--log-level', 'warn'];
  // Fairness keys (core/video-task.ts taskPriority) take effect only with this on: one
  // account's backlog then waits its turn among the others' (README, Operations).
  args.push('--dynamic-config-value', 'matching.enableFairness=true');
  // For tests, one partition per task queue: with one, a backlog is handed out in order (in
  // turns between accounts), which tests can rely on; with Temporal's four, a task landing in an
  // emptier partition jumps ahead of a small backlog by chance. Not for `npm start`: its server
  // keeps its data, and tasks queued in partitions 1 to 3 by an earlier run would never be read.
  if (options.onePartition) args.push('--dynamic-config-value', 'matching.numTaskqueueReadPartitions=1', '--dynamic-config-value', 'matching.numTaskqueueWritePartitions=1');
  if (options.uiPort) args.push('--ui-port', String(options.uiPort));
  else args.push('--headless');
  if (options.dbFile) {
    mkdirSync(path.dirname(options.dbFile), { recursive: true });
    // WAL, and commits without waiting for fsync: about 4x the workflow starts per second of
    // the default journal here (13 vs 50 ms each, 8 in parallel). A killed server loses
    // nothing; only an OS crash may lose the last commits: the right trade for a local stack.
    args.push('--db-filename', options.dbFile, '--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
  }
  const temporal = startProcess('temporal', toolPaths.temporal, args, { output: options.output ?? 'quiet', ownProcessGroup: options.ownProcessGroup ?? false });
  await waitForPort('127.0.0.1', options.port, temporal);
  if (options.uiPort) await waitForPort('127.0.0.1', options.uiPort, temporal);
  return temporal;
}
