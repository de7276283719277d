import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { freePort } from '../../scripts/lib/processes.ts';
import { STACK_DATA_VARIABLE } from '../../scripts/lib/stack-guard.ts';
import { testTemporalAddress, uniqueName } from '../helpers/engines.ts';

// `npm start` (scripts/start.ts) on the suite's store and Temporal: a worker or api that dies is
// started again, and a task submitted after the worker was killed still runs to its end.

const ADMIN_TOKEN = 'start-supervision-admin-token';

/** The pids of `parent`'s children whose command line matches `pattern`, read from /proc. */
function childPids(parent: number, pattern: RegExp): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const parentPid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      if (parentPid === parent && pattern.test(readFileSync(`/proc/${entry}/cmdline`, 'utf8'))) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

async function until(holds: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const started = Date.now();
  while (!(await holds())) {
    assert.ok(Date.now() - started < timeoutMs, `${what} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('npm start', () => {
  it('refuses a bad setting or catalog in one line before it starts anything', { timeout: 60_000 }, async () => {
    for (const [setting, said] of [
      [{ SHUTDOWN_GRACE_MS: 'abc' }, /^\[framegate\] Invalid configuration: SHUTDOWN_GRACE_MS: /m],
      [{ CATALOG_FILE: '/nonexistent/catalog.json' }, /^\[framegate\] CATALOG_FILE: cannot read \/nonexistent\/catalog\.json \(ENOENT\)$/m],
    ] as const) {
      const stack = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
        cwd: projectRoot,
        env: { ...process.env, MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI, TEMPORAL_ADDRESS: testTemporalAddress(), ADMIN_TOKEN, PORT: String(await freePort()), SIMULATOR_PORT: String(await freePort()), ...setting },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      stack.stdout.on('data', (chunk: Buffer) => (output += chunk));
      stack.stderr.on('data', (chunk: Buffer) => (output += chunk));
      const code = await new Promise<number | null>((resolve) => stack.on('close', resolve));
      assert.equal(code, 1, output);
      assert.match(output, said);
      // Nothing was started: the simulator (the first process) never was.
      assert.doesNotMatch(output, /\[simulator\]|starting/);
    }
  });

  it('stopped during its start-up, stops everything it started, the processes it was starting included', { timeout: 120_000 }, async () => {
    const database = uniqueName('start_stopped_early');
    /** The processes npm start made for this test (its marker and this test's database in their
     * environment), by pid: they run in process groups of their own and outlive it if left. */
    const leftBehind = () =>
      readdirSync('/proc').filter((entry) => {
        if (!/^\d+$/.test(entry)) return false;
        try {
          const environment = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
          return environment.includes(`MONGODB_DB=${database}`) && environment.some((variable) => variable.startsWith(`${STACK_DATA_VARIABLE}=`));
        } catch {
          return false;
        }
      });
    for (const afterMs of [300, 1_500, 3_000]) {
      const stack = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
        cwd: projectRoot,
        env: { ...process.env, MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI, MONGODB_DB: database, TEMPORAL_ADDRESS: testTemporalAddress(), TEMPORAL_TASK_QUEUE: uniqueName('start-stopped-early'), ADMIN_TOKEN, PORT: String(await freePort()), SIMULATOR_PORT: String(await freePort()) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      stack.stdout.on('data', (chunk: Buffer) => (output += chunk));
      stack.stderr.on('data', (chunk: Buffer) => (output += chunk));
      const exited = new Promise<number | null>((resolve) => stack.on('close', resolve));
      await new Promise((resolve) => setTimeout(resolve, afterMs));
      stack.kill('SIGINT');
      await exited;
      assert.deepEqual(leftBehind(), [], `nothing left after a Ctrl-C at ${afterMs} ms:\n${output}`);
      assert.doesNotMatch(output, /exited before listening|did not print/, `a stop is not reported as a failure (Ctrl-C at ${afterMs} ms):\n${output}`);
    }
  });

  it('starts a killed worker and a killed api again, and the tasks carry on', { timeout: 180_000 }, async () => {
    const [port, simulatorPort] = [await freePort(), await freePort()];
    const stack = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], {
      cwd: projectRoot,
      env: {
        ...process.env,
        MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
        MONGODB_DB: uniqueName('start_supervision'),
        TEMPORAL_ADDRESS: testTemporalAddress(),
        TEMPORAL_TASK_QUEUE: uniqueName('start-supervision'),
        ADMIN_TOKEN,
        PORT: String(port),
        SIMULATOR_PORT: String(simulatorPort),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    stack.stdout.on('data', (chunk: Buffer) => (output += chunk));
    stack.stderr.on('data', (chunk: Buffer) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => stack.on('close', resolve));
    try {
      await until(() => output.includes('Framegate is up'), 'the stack is up', 120_000);
      const base = `http://127.0.0.1:${port}`;
      const call = async (method: 'GET' | 'POST', path: string, token: string, body?: object) => {
        const answer = await request(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body && JSON.stringify(body) });
        return { status: answer.statusCode, json: (await answer.body.json()) as Record<string, any> };
      };

      const [worker] = childPids(stack.pid!, /worker\/main\.ts/);
      assert.ok(worker, `a worker child:\n${output.slice(-2000)}`);
      process.kill(worker, 'SIGKILL');
      await until(() => output.includes('worker was killed (SIGKILL); starting it again'), 'the worker is started again');

      const account = await call('POST', '/admin/accounts', ADMIN_TOKEN, { name: 'supervised', balance_usd: 5 });
      const key = await call('POST', `/admin/accounts/${account.json.id}/keys`, ADMIN_TOKEN, { name: 'k' });
      const submitted = await call('POST', '/v1/video/generations', key.json.key, { model: 'seedance-2.0', prompt: 'after the crash [sim:delay=0.5]' });
      assert.equal(submitted.status, 200, JSON.stringify(submitted.json));
      await until(async () => (await call('GET', `/v1/video/generations/${submitted.json.task_id}`, key.json.key)).json.status === 'succeeded', 'the task succeeds on the new worker');

      const [api] = childPids(stack.pid!, /dist\/api/);
      assert.ok(api, 'an api child');
      process.kill(api, 'SIGKILL');
      await until(() => output.includes('api was killed (SIGKILL); starting it again'), 'the api is started again');
      await until(async () => (await call('GET', '/v1/models', key.json.key).catch(() => ({ status: 0 }))).status === 200, 'the new api answers');
    } finally {
      stack.kill('SIGINT');
      await exited;
    }
    assert.match(output, /\[framegate\] stopped\./);
  });

  it('finishes its ordered stop when npm passes a SIGTERM on and exits at once', { timeout: 180_000 }, async () => {
    const [port, simulatorPort] = [await freePort(), await freePort()];
    // What npm does with a signal: pass it on to the script, then go without waiting for it.
    const npmLike = `const child = require('node:child_process').spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], { stdio: 'inherit' });
      process.on('SIGTERM', () => { child.kill('SIGTERM'); process.exit(143); });`;
    const npm = spawn(process.execPath, ['-e', npmLike], {
      cwd: projectRoot,
      env: {
        ...process.env,
        MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
        MONGODB_DB: uniqueName('start_npm_gone'),
        // A stream still open holds the api's stop this long: longer than npm's going is noticed.
        SHUTDOWN_GRACE_MS: '3000',
        TEMPORAL_ADDRESS: testTemporalAddress(),
        TEMPORAL_TASK_QUEUE: uniqueName('start-npm-gone'),
        ADMIN_TOKEN,
        PORT: String(port),
        SIMULATOR_PORT: String(simulatorPort),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    // The stack keeps writing to these pipes after npm is gone.
    npm.stdout.on('data', (chunk: Buffer) => (output += chunk));
    npm.stderr.on('data', (chunk: Buffer) => (output += chunk));
    const [script] = await (async () => {
      await until(() => output.includes('Framegate is up'), 'the stack is up', 120_000);
      return childPids(npm.pid!, /scripts\/start\.ts/);
    })();
    assert.ok(script, 'scripts/start.ts under the npm stand-in');
    const [api] = childPids(script, /dist\/api/);
    assert.ok(api, 'an api child');
    const base = `http://127.0.0.1:${port}`;
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const account = (await (await request(`${base}/admin/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'npm-gone', balance_usd: 5 }) })).body.json()) as { id: string };
    const { key } = (await (await request(`${base}/admin/accounts/${account.id}/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'k' }) })).body.json()) as { key: string };
    const stream = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'a long answer please [sim:slow]' }] }),
    });
    assert.equal(stream.statusCode, 200);
    stream.body.resume();
    stream.body.on('error', () => {});
    npm.kill('SIGTERM');
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      await until(() => !alive(script), 'scripts/start.ts exits', 60_000);
    } finally {
      if (alive(api)) process.kill(api, 'SIGKILL');
    }
    assert.match(output, /the process that started the stack \(npm\) is gone/);
    assert.match(output, /\[framegate\] stopped\./, `the ordered stop finished:\n${output.slice(-1500)}`);
    assert.ok(!alive(api), 'the api exited');
  });
});

