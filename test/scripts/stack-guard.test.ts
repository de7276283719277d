import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { scratchDirectory } from '../helpers/scratch-directory.ts';
import { assertDistinctPorts, assertPortFree, connectHost, lockDataDir, portFrom, STACK_DATA_VARIABLE, StackRefusal, urlHost, withoutPassword } from '../../scripts/lib/stack-guard.ts';

// What `npm start` checks before it starts anything (scripts/lib/stack-guard.ts).

describe('npm start refuses a set-up it cannot run, in one line', () => {
  it('names a port variable that is not a port', () => {
    for (const value of ['abc', '99999', '0', '80.5', '-1']) {
      process.env.FRAMEGATE_TEST_SOME_PORT = value;
      assert.throws(() => portFrom('FRAMEGATE_TEST_SOME_PORT', 1), (error: Error) => error instanceof StackRefusal && /FRAMEGATE_TEST_SOME_PORT must be a port number from 1 to 65535, got/.test(error.message), value);
    }
    process.env.FRAMEGATE_TEST_SOME_PORT = '8081';
    assert.equal(portFrom('FRAMEGATE_TEST_SOME_PORT', 1), 8081);
    delete process.env.FRAMEGATE_TEST_SOME_PORT;
    assert.equal(portFrom('FRAMEGATE_TEST_SOME_PORT', 8080), 8080);
  });

  it('names the variable of a port something else listens on', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      await assert.rejects(assertPortFree('127.0.0.1', port, 'FERRETDB_PORT'), new RegExp(`port ${port} \\(FERRETDB_PORT\\) is already in use on 127\\.0\\.0\\.1`));
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
    await assertPortFree('127.0.0.1', port, 'FERRETDB_PORT');
  });

  /** A live process whose command line carries `args` (as an `npm start` or an engine's does).
   * The `--` keeps node from reading them as its own options: `--state-dir=` was one, and node
   * exited at once ("bad option"), so the scan found no orphan whenever it lost that race (CI
   * did). It is awaited until it writes, not just until 'spawn': for a moment after exec the
   * kernel shows an empty /proc/<pid>/cmdline (about one spawn in a hundred here). */
  async function liveProcess(...args: string[]) {
    return liveProcessWith({}, ...args);
  }

  async function liveProcessWith(env: Record<string, string>, ...args: string[]) {
    const child = spawn(process.execPath, ['-e', 'process.stdout.write("up"); setTimeout(() => {}, 30_000)', '--', ...args], { env: { ...process.env, ...env } });
    await new Promise((resolve) => child.stdout.once('data', resolve));
    return { pid: child.pid!, stop: () => new Promise((resolve) => (child.kill(), child.once('close', resolve))) };
  }

  it('refuses a second stack on the same data while the first runs, and takes over a dead one\'s lock', async () => {
    const dataDir = scratchDirectory('lock');
    const lockFile = path.join(dataDir, 'stack.pid');
    const other = await liveProcess('scripts/start.ts');
    try {
      writeFileSync(lockFile, `${other.pid}\n`);
      assert.throws(() => lockDataDir(dataDir), new RegExp(`a stack is already running from this checkout \\(pid ${other.pid}`));
    } finally {
      await other.stop();
    }
    // Its process gone, the lock is stale: taken over, with this process's pid.
    lockDataDir(dataDir);
    assert.equal(readFileSync(lockFile, 'utf8').trim(), String(process.pid));
  });

  it('takes over a lock whose pid now belongs to another program (after a reboot, in a container)', async () => {
    const dataDir = scratchDirectory('lock');
    const stranger = await liveProcess('something-else.js');
    try {
      writeFileSync(path.join(dataDir, 'stack.pid'), `${stranger.pid}\n`);
      lockDataDir(dataDir);
      assert.equal(readFileSync(path.join(dataDir, 'stack.pid'), 'utf8').trim(), String(process.pid));
    } finally {
      await stranger.stop();
    }
  });

  it('refuses while an engine of a stack killed with SIGKILL still runs on the same files', async () => {
    const dataDir = scratchDirectory('lock');
    const orphan = await liveProcess(`--state-dir=${path.join(dataDir, 'ferretdb')}`);
    try {
      assert.throws(() => lockDataDir(dataDir), new RegExp(`processes of an earlier stack still run on .* \\(pid ${orphan.pid}`));
      assert.ok(!existsSync(path.join(dataDir, 'stack.pid')), 'no lock taken');
    } finally {
      await orphan.stop();
    }
  });

  it('names the api, worker and simulator a killed stack left behind, by the data directory in their environment', async () => {
    const dataDir = scratchDirectory('lock');
    // As npm start runs them: `node --import tsx worker/main.ts`, nothing of .data/ in the command line.
    const worker = await liveProcessWith({ [STACK_DATA_VARIABLE]: dataDir }, 'worker/main.ts');
    const otherStacks = await liveProcessWith({ [STACK_DATA_VARIABLE]: `${dataDir}-other` }, 'worker/main.ts');
    try {
      assert.throws(() => lockDataDir(dataDir), (error: Error) => {
        assert.match(error.message, new RegExp(`processes of an earlier stack still run on .* \\(pid ${worker.pid}:`));
        assert.doesNotMatch(error.message, new RegExp(`\\b${otherStacks.pid}\\b`));
        return true;
      });
    } finally {
      await worker.stop();
      await otherStacks.stop();
    }
  });

  it('names the running stack, not its own engines, when a second start finds one', async () => {
    const dataDir = scratchDirectory('lock');
    const stack = await liveProcess('scripts/start.ts');
    // The running stack's store, on the same files as a leftover's would be.
    const itsStore = await liveProcess(`--state-dir=${path.join(dataDir, 'ferretdb')}`);
    try {
      writeFileSync(path.join(dataDir, 'stack.pid'), `${stack.pid}\n`);
      assert.throws(() => lockDataDir(dataDir), (error: Error) => {
        assert.match(error.message, new RegExp(`a stack is already running from this checkout \\(pid ${stack.pid}`));
        assert.doesNotMatch(error.message, new RegExp(`kill ${itsStore.pid}`));
        return true;
      });
    } finally {
      await itsStore.stop();
      await stack.stop();
    }
  });

  it('refuses two of the stack\'s ports set to one number', () => {
    assert.throws(() => assertDistinctPorts([[18080, 'PORT'], [18090, 'SIMULATOR_PORT'], [18080, 'TEMPORAL_UI_PORT']]), (error: Error) => error instanceof StackRefusal && error.message === 'PORT and TEMPORAL_UI_PORT are both 18080: give each its own port.');
    assertDistinctPorts([[18080, 'PORT'], [18090, 'SIMULATOR_PORT']]);
  });

  it('prints a connection string without its password, and reaches a wildcard host on loopback', () => {
    assert.equal(withoutPassword('mongodb://ops:TopSecretPw@127.0.0.1:57027/?authMechanism=PLAIN'), 'mongodb://ops:***@127.0.0.1:57027/?authMechanism=PLAIN');
    assert.equal(withoutPassword('mongodb+srv://ops:p%40ss@cluster.example/db'), 'mongodb+srv://ops:***@cluster.example/db');
    assert.equal(withoutPassword('mongodb://127.0.0.1:27027/'), 'mongodb://127.0.0.1:27027/');
    assert.deepEqual(['0.0.0.0', '::', '::1', '127.0.0.1'].map(connectHost), ['127.0.0.1', '::1', '::1', '127.0.0.1']);
    assert.deepEqual(['::1', '127.0.0.1', '[::1]'].map(urlHost), ['[::1]', '127.0.0.1', '[::1]']);
  });
});
