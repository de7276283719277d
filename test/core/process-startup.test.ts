import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { freePort } from '../../scripts/lib/processes.ts';
import { MongoServerSelectionError } from 'mongodb';
import { untilConnected } from '../../core/process-startup.ts';

// How the api and the worker start (core/process-startup.ts): a bad setting is one line and
// exit 1; a store that does not answer yet is waited for.

/** Runs `entry` under tsx with `environment`; resolves at its exit, or kills it once its stderr
 * matches `until` or after `forMs`. */
function run(entry: string, environment: Record<string, string>, forMs: number, until?: RegExp): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], { cwd: projectRoot, env: { ...process.env, ADMIN_TOKEN: 'process-startup-admin-token', ...environment }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
      if (until?.test(stderr)) child.kill('SIGKILL');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), forMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('api and worker start-up', () => {
  it('tries again, waiting longer each time up to 5 s, until the connection is made', async () => {
    const waits: number[] = [];
    let tries = 0;
    const connected = await untilConnected('test', 'a thing', async () => {
      tries += 1;
      if (tries < 6) throw new MongoServerSelectionError(`refused ${tries}\nwith a second line`, {} as never);
      return 'connected';
    }, async (ms) => void waits.push(ms));
    assert.equal(connected, 'connected');
    assert.deepEqual(waits, [500, 1000, 2000, 4000, 5000]);
  });

  for (const [setting, environment, said] of [
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }, /^framegate api: Invalid configuration: LOG_LEVEL/],
    ['CATALOG_FILE', { CATALOG_FILE: '/nonexistent/catalog.json' }, /^framegate api: CATALOG_FILE: cannot read \/nonexistent\/catalog\.json \(ENOENT\)/],
  ] as const) {
    it(`says what is wrong with ${setting} in one line and exits 1`, async () => {
      const { code, stderr } = await run('api/server.ts', environment, 30_000);
      assert.equal(code, 1, stderr);
      assert.match(stderr, said);
      assert.equal(stderr.trim().split('\n').length, 1, stderr);
    });
  }

  it('says in one line that its port is taken, and exits 1', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as AddressInfo).port;
    try {
      const { code, stderr } = await run('api/server.ts', { HOST: '127.0.0.1', PORT: String(port), MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI!, MONGODB_DB: 'process_startup_port' }, 60_000);
      assert.equal(code, 1, stderr);
      assert.match(stderr, new RegExp(`^framegate api: HOST, PORT: cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\)$`, 'm'));
      assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
    } finally {
      taken.close();
    }
  });

  it('waits for a store that does not answer instead of exiting', async () => {
    const closedPort = await freePort();
    const { code, stderr } = await run('api/server.ts', { MONGODB_URI: `mongodb://127.0.0.1:${closedPort}/` }, 60_000, /\(try 2: /);
    assert.equal(code, null, `still running at its second try (killed then):\n${stderr}`);
    assert.match(stderr, /^framegate api: waiting for the store \(MONGODB_URI\) \(try 1: .*\n.*\(try 2: /m);
    assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  });

  it('does not wait out a connection string that can never work: one line, exit 1', async () => {
    const { code, stderr } = await run('api/server.ts', { MONGODB_URI: 'postgres://127.0.0.1/framegate' }, 30_000);
    assert.equal(code, 1, stderr);
    assert.match(stderr, /^framegate api: cannot use the store \(MONGODB_URI\): /);
    assert.equal(stderr.trim().split('\n').length, 1, stderr);
  });
});
