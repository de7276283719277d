import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadCatalog } from '../core/catalog.ts';
import { loadConfig } from '../core/config.ts';
import { WORKER_STOP_MS } from '../core/video-task.ts';
import { buildApi, builtApiArgs } from './lib/build-api.ts';
import { projectRoot, provision, startFerretDb, startTemporalDevServer } from './lib/engines.ts';
import { startProcess, waitForOutput, waitForPort, type ManagedProcess } from './lib/processes.ts';
import { assertDistinctPorts, assertPortFree, connectHost, lockDataDir, portFrom, STACK_DATA_VARIABLE, StackRefusal, urlHost, withoutPassword } from './lib/stack-guard.ts';

// `npm start`: the whole local stack in one command. Engines first (store, Temporal with its
// Web UI), then the simulator, the worker and the api as separate processes, each with its
// output prefixed by its name. Data lives under .data/ and survives restarts. Ctrl-C stops all.
// The api runs from its build (scripts/lib/build-api.ts), made afresh here; the rest under tsx.

const started = Date.now();
const dataDir = path.join(projectRoot, '.data');
mkdirSync(dataDir, { recursive: true });

/** A mistake in the set-up: said in one line, before anything starts. */
function refuse(error: unknown): never {
  console.error(`[framegate] ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}

let ports: { api: number; simulator: number; ferretdb: number; temporal: number; temporalUi: number };
try {
  ports = {
    api: portFrom('PORT', 8080),
    simulator: portFrom('SIMULATOR_PORT', 8090),
    ferretdb: portFrom('FERRETDB_PORT', 27027),
    temporal: portFrom('TEMPORAL_PORT', 7233),
    temporalUi: portFrom('TEMPORAL_UI_PORT', 8233),
  };
  // Two stacks' engines on one .data/ corrupt each other; with both engines elsewhere
  // (MONGODB_URI, TEMPORAL_ADDRESS) nothing here is shared but the admin token.
  if (!process.env.MONGODB_URI || !process.env.TEMPORAL_ADDRESS) lockDataDir(dataDir);
} catch (error) {
  refuse(error);
}
// Where the api listens (HOST), and where this script and the banner reach it.
const apiHost = connectHost(process.env.HOST?.trim() || '127.0.0.1');

/** The admin token: ADMIN_TOKEN, or the one kept in .data/admin-token (made on the first start,
 * written whole or not at all). One too short for the api is refused here, naming where it came
 * from, before any engine starts. */
function adminToken(): { token: string; source: string } {
  const fromEnvironment = process.env.ADMIN_TOKEN?.trim();
  const file = path.join(dataDir, 'admin-token');
  const shown = path.relative(process.cwd(), file) || file;
  if (!fromEnvironment && !existsSync(file)) {
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600 });
    renameSync(partial, file);
  }
  const admin = fromEnvironment ? { token: fromEnvironment, source: 'the ADMIN_TOKEN environment variable' } : { token: readFileSync(file, 'utf8').trim(), source: shown };
  if (admin.token.length < 16) {
    const fix = fromEnvironment ? 'set a longer one' : `delete ${shown} for a new one, or put a longer one in it`;
    throw new StackRefusal(`the admin token in ${admin.source} has ${admin.token.length} characters; it needs at least 16: ${fix}.`);
  }
  return admin;
}

const children: ManagedProcess[] = [];
/** The stop under way, once one began. */
let stopped: Promise<void> | undefined;
const running = () => [...children].reverse().filter((child) => child.running());
async function stopAll(exitCode: number): Promise<never> {
  // A second reason to stop (npm gone right after passing on a Ctrl-C, say) waits for the stop
  // under way: exiting at once left the api settling its leases while this process's exit
  // signalled the store and Temporal away from under it, and the api hung.
  stopped ??= (async () => {
    console.log('\n[framegate] stopping…');
    // Reverse start order: the api stops taking requests before the engines go away. Again
    // while any runs: a stop during start-up meets processes the start sequence made meanwhile.
    for (let left = running(); left.length > 0; left = running()) for (const child of left) await child.stop();
    console.log('[framegate] stopped.');
  })();
  await stopped;
  process.exit(exitCode);
}
// The children run in process groups of their own (ownProcessGroup), so a Ctrl-C reaches only
// this process and the stack stops in order; a closed terminal (SIGHUP) must stop them too.
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));
process.on('SIGHUP', () => void stopAll(0));
// `npm start` run by a supervisor that signals npm alone (systemd, `timeout`, a CI runner): npm
// may go without passing the signal on, and this process is left an orphan holding every port.
const parentAtStart = process.ppid;
setInterval(() => {
  if (process.ppid !== parentAtStart) {
    console.error('[framegate] the process that started the stack (npm) is gone; stopping the stack.');
    void stopAll(1);
  }
}, 1_000).unref();
// Any other way out (a crash here): their own groups would outlive us, so signal them at least.
process.on('exit', () => {
  for (const child of children) if (child.running()) child.child.kill('SIGTERM');
});

/** An engine or the simulator: the rest of the stack cannot do without it, so its exit stops
 * the stack. */
function watch(child: ManagedProcess): ManagedProcess {
  children.push(child);
  // Made while the stack was being stopped (a Ctrl-C during start-up): it goes at once.
  if (stopped) void child.stop();
  void child.exited.then((code) => {
    if (stopped) return;
    // Its own words on why (a port taken, a locked file): engines print little otherwise.
    const said = child.recentOutput().trim().split('\n').slice(-5).join('\n');
    if (said) console.error(`[framegate] ${child.name}'s last output:\n${said}`);
    console.error(`[framegate] ${child.name} ${exitDescription(child, code)}; stopping the stack.`);
    void stopAll(1);
  });
  return child;
}

const RESTARTS_PER_MINUTE = 5;

/** The api or the worker: started again a second after it dies, as a process supervisor would,
 * so the tasks in flight carry on (Temporal, the store and the simulator keep their state).
 * RESTARTS_PER_MINUTE exits within a minute stop the stack: that is a crash loop. */
function supervise(start: () => ManagedProcess): ManagedProcess {
  const first = start();
  const slot = children.push(first) - 1;
  if (stopped) void first.stop();
  const exits: number[] = [];
  const follow = (child: ManagedProcess) => {
    void child.exited.then((code) => {
      if (stopped) return;
      const now = Date.now();
      exits.push(now);
      while (exits[0]! < now - 60_000) exits.shift();
      if (exits.length >= RESTARTS_PER_MINUTE) {
        console.error(`[framegate] ${child.name} ${exitDescription(child, code)}, ${exits.length} times within a minute; stopping the stack.`);
        void stopAll(1);
        return;
      }
      console.error(`[framegate] ${child.name} ${exitDescription(child, code)}; starting it again.`);
      setTimeout(() => {
        if (stopped) return;
        const next = start();
        children[slot] = next;
        follow(next);
      }, 1_000).unref();
    });
  };
  follow(first);
  return first;
}

function exitDescription(child: ManagedProcess, code: number | null): string {
  const signal = child.child.signalCode;
  return signal ? `was killed (${signal})` : `exited unexpectedly (code ${code})`;
}

try {
  // Every port this stack will listen on, before anything starts.
  const wanted: Array<[string, number, string]> = [
    // Where the api will listen (HOST), wildcard included: a listener on another interface counts.
    [process.env.HOST?.trim() || '127.0.0.1', ports.api, 'PORT'],
    ['127.0.0.1', ports.simulator, 'SIMULATOR_PORT'],
    ...(process.env.MONGODB_URI ? [] : [['127.0.0.1', ports.ferretdb, 'FERRETDB_PORT'] as [string, number, string]]),
    ...(process.env.TEMPORAL_ADDRESS ? [] : [['127.0.0.1', ports.temporal, 'TEMPORAL_PORT'], ['127.0.0.1', ports.temporalUi, 'TEMPORAL_UI_PORT']] as Array<[string, number, string]>),
  ];
  assertDistinctPorts(wanted.map(([, port, variable]) => [port, variable]));
  for (const [host, port, variable] of wanted) await assertPortFree(host, port, variable);
} catch (error) {
  if (error instanceof StackRefusal) refuse(error);
  throw error;
}

try {
  provision();
  const admin = adminToken();
  // The marker lets a later start name this stack's processes if it is killed with SIGKILL.
  const environment: NodeJS.ProcessEnv = { ...process.env, ADMIN_TOKEN: admin.token, [STACK_DATA_VARIABLE]: dataDir };
  // The api's and worker's settings and catalog, read now: a mistake there is one line before
  // any engine starts, not an api that exits seconds after the store and Temporal came up.
  try {
    loadCatalog(loadConfig(environment).CATALOG_FILE);
  } catch (error) {
    throw new StackRefusal(error instanceof Error ? error.message : String(error));
  }

  if (!process.env.MONGODB_URI) {
    console.log(`[framegate] starting FerretDB on 127.0.0.1:${ports.ferretdb} (data in .data/ferretdb)`);
    watch(await startFerretDb({ port: ports.ferretdb, dataDir: path.join(dataDir, 'ferretdb'), ownProcessGroup: true }));
    environment.MONGODB_URI = `mongodb://127.0.0.1:${ports.ferretdb}/`;
  }
  if (!process.env.TEMPORAL_ADDRESS) {
    console.log(`[framegate] starting the Temporal dev server on 127.0.0.1:${ports.temporal} (history in .data/temporal.db)`);
    watch(await startTemporalDevServer({ port: ports.temporal, uiPort: ports.temporalUi, dbFile: path.join(dataDir, 'temporal.db'), ownProcessGroup: true }));
    environment.TEMPORAL_ADDRESS = `127.0.0.1:${ports.temporal}`;
    environment.TEMPORAL_UI_URL ||= `http://127.0.0.1:${ports.temporalUi}`;
  }
  environment.SIMULATOR_URL ||= `http://127.0.0.1:${ports.simulator}`;
  environment.PORT = String(ports.api);
  environment.SIMULATOR_PORT = String(ports.simulator);
  // The local stack delivers webhooks to receivers on this machine, so loopback is allowed here.
  environment.OUTBOUND_ALLOWLIST ||= 'loopback';

  const node = (name: string, entry: string, stopTimeoutMs?: number) => () =>
    startProcess(name, process.execPath, ['--import', 'tsx', path.join(projectRoot, entry)], { env: environment, output: 'inherit-prefixed', ownProcessGroup: true, ...(stopTimeoutMs ? { stopTimeoutMs } : {}) });
  const simulator = watch(node('simulator', 'simulator/server.ts')());
  await waitForPort('127.0.0.1', ports.simulator, simulator);
  // A stopping worker finishes the activities under way (a webhook attempt, a vendor call).
  const worker = supervise(node('worker', 'worker/main.ts', WORKER_STOP_MS + 5_000));
  await buildApi();
  // Stopping, the api lets running calls finish for SHUTDOWN_GRACE_MS, then settles its spend
  // leases (at most 10 s): it is not killed before that.
  const apiStopMs = loadConfig(environment).SHUTDOWN_GRACE_MS + 15_000;
  const api = supervise(() => startProcess('api', process.execPath, builtApiArgs, { env: environment, output: 'inherit-prefixed', stopTimeoutMs: apiStopMs, ownProcessGroup: true }));
  await waitForPort(apiHost, ports.api, api);
  // The worker bundles the workflow code first (a few seconds); tasks submitted before it polls
  // would simply wait in Temporal, but "up" should mean up.
  await waitForOutput(worker, /worker polling task queue/);

  const base = `http://${urlHost(apiHost)}:${ports.api}`;
  console.log(
    [
      '',
      `Framegate is up (${((Date.now() - started) / 1000).toFixed(1)} s):`,
      `  API base URL (OpenAI clients)  ${base}/v1`,
      `  Temporal Web UI                ${environment.TEMPORAL_UI_URL ?? `(Temporal at ${environment.TEMPORAL_ADDRESS}; set TEMPORAL_UI_URL to show its UI here)`}`,
      `  Vendor simulator               ${environment.SIMULATOR_URL}`,
      `  Store                          ${withoutPassword(environment.MONGODB_URI ?? "")}`,
      `  Admin token                    in ${admin.source}`,
      '  Stop with Ctrl-C.',
      '',
    ].join('\n'),
  );
} catch (error) {
  // A stop under way (a Ctrl-C during start-up) makes the start sequence fail where it was: that
  // is no error of its own to report.
  if (stopped) await stopped;
  else console.error(`[framegate] ${error instanceof Error ? error.message : String(error)}`);
  await stopAll(1);
}
