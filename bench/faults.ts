import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { buildApi, builtApiArgs } from '../scripts/lib/build-api.ts';
import { projectRoot, provision, startFerretDb, startTemporalDevServer } from '../scripts/lib/engines.ts';
import { freePort, startProcess, waitForOutput, waitForPort, type ManagedProcess } from '../scripts/lib/processes.ts';
import { loadConfig } from '../core/config.ts';
import { connectDatabase } from '../store/database.ts';
import { auditTasksAndLedger, type AuditEntry, type AuditTask } from './lib/fault-audit.ts';
import { CallRecorder, every, phaseTable, totals, unavailableReasons } from './lib/fault-load.ts';

// `npm run bench:faults`: the whole stack as separate processes (FerretDB, the Temporal dev
// server with its history in a file, the vendor simulator, one worker, one api) under steady
// open-loop load, while the store, then Temporal, then the worker are killed (SIGKILL) and
// restarted on the same port and data. Then the load stops and every accepted task must reach
// a final state. Printed: a table per phase (answers by kind, hung calls, the slowest answer,
// what /readyz said) and the audit of tasks and money read straight from the store.
// Exits non-zero when a task is lost, anything is charged twice (or charged although it
// failed, or charged although its submission was refused), a call hung, a 5xx other than 503
// in the spec's body was answered, the api process died, or the balance does not add up.

const seconds = (name: string, fallback: number) => Number(process.env[name] || fallback) * 1000;
const WARM_UP_MS = seconds('FAULTS_WARM_UP_SECONDS', 15);
const OUTAGE_MS = seconds('FAULTS_OUTAGE_SECONDS', 10);
const RECOVERY_MS = seconds('FAULTS_RECOVERY_SECONDS', 20);
const DRAIN_MS = seconds('FAULTS_DRAIN_SECONDS', 300);
const CALL_TIMEOUT_MS = seconds('FAULTS_CALL_TIMEOUT_SECONDS', 10);
const VIDEOS_PER_SECOND = Number(process.env.FAULTS_VIDEOS_PER_SECOND || 4);
const ADMIN_TOKEN = `faults-admin-${randomBytes(12).toString('hex')}`;
const VIDEO_PRICE_MICROS = 160_000; // seedance-2.0, 4 s at 480p
const BALANCE_USD = 10_000;

const dataDir = path.join(projectRoot, `.data/faults-${process.pid}`);
rmSync(dataDir, { recursive: true, force: true });
mkdirSync(path.join(dataDir, 'logs'), { recursive: true });
const logs = new Map<string, WriteStream>();
const running = new Set<ManagedProcess>();
let stopping = false;

function log(message: string): void {
  console.log(`[faults ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

/** Every child's output goes to .data/faults-<pid>/logs/<name>.log (kept when the run fails). */
function supervise(child: ManagedProcess): ManagedProcess {
  let sink = logs.get(child.name);
  if (!sink) {
    sink = createWriteStream(path.join(dataDir, 'logs', `${child.name}.log`), { flags: 'a' });
    logs.set(child.name, sink);
  }
  const write = (chunk: Buffer) => sink.write(chunk);
  child.child.stdout?.on('data', write);
  child.child.stderr?.on('data', write);
  running.add(child);
  void child.exited.then((code) => {
    running.delete(child);
    sink.write(`--- ${child.name} exited with ${code} ---\n`);
  });
  return child;
}

/** Processes this bench killed on purpose. */
const killedOnPurpose = new Set<ManagedProcess>();
async function kill(child: ManagedProcess): Promise<void> {
  killedOnPurpose.add(child);
  child.child.kill('SIGKILL');
  await child.exited;
}

async function stopEverything(): Promise<void> {
  stopping = true;
  // The api first, the engines last, one after the other.
  const order = ['api', 'worker', 'simulator', 'temporal', 'ferretdb'];
  for (const child of [...running].sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name))) await child.stop().catch(() => undefined);
  await Promise.allSettled([...logs.values()].map((sink) => new Promise((resolve) => sink.end(resolve))));
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void stopEverything().then(() => process.exit(130)));

/** Child environments without proxy settings: every call here is loopback. */
function loopbackEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost', ...extra };
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy']) delete env[name];
  return env;
}

provision();
const ports = { ferretdb: await freePort(), temporal: await freePort(), simulator: await freePort(), api: await freePort() };
const origin = `http://127.0.0.1:${ports.api}`;
const mongodbUri = `mongodb://127.0.0.1:${ports.ferretdb}/`;
const databaseName = 'faults';
const environment = loopbackEnv({
  HOST: '127.0.0.1',
  PORT: String(ports.api),
  PUBLIC_BASE_URL: origin,
  MONGODB_URI: mongodbUri,
  MONGODB_DB: databaseName,
  TEMPORAL_ADDRESS: `127.0.0.1:${ports.temporal}`,
  TEMPORAL_TASK_QUEUE: `faults-${process.pid}`,
  SIMULATOR_URL: `http://127.0.0.1:${ports.simulator}`,
  SIMULATOR_PORT: String(ports.simulator),
  // The audit reads the ledger once every lease has gone back: the account's $10,000 would
  // otherwise make its leases small ones, kept 5 minutes.
  SPEND_LEASE_SMALL_IDLE_MS: '5000',
  ADMIN_TOKEN,
  CATALOG_FILE: 'config/catalog.local.json',
  OUTBOUND_ALLOWLIST: 'loopback',
  LOG_LEVEL: process.env.FAULTS_LOG_LEVEL || 'warn',
});
const ferretDataDir = path.join(dataDir, 'ferretdb');
const temporalDbFile = path.join(dataDir, 'temporal.db');

const startStore = async () => supervise(await startFerretDb({ port: ports.ferretdb, dataDir: ferretDataDir }));
const startTemporal = async () => supervise(await startTemporalDevServer({ port: ports.temporal, dbFile: temporalDbFile }));
const node = (name: string, entry: string) =>
  supervise(startProcess(name, process.execPath, ['--import', 'tsx', path.join(projectRoot, entry)], { cwd: projectRoot, env: environment }));
async function startWorker(): Promise<ManagedProcess> {
  const worker = node('worker', 'worker/main.ts');
  await waitForOutput(worker, /worker polling task queue/);
  return worker;
}

const unexpectedExits: string[] = [];
function watchForCrash(child: ManagedProcess): ManagedProcess {
  void child.exited.then((code) => {
    if (!killedOnPurpose.has(child) && !stopping) {
      unexpectedExits.push(`${child.name} (code ${code})`);
      log(`${child.name} exited unexpectedly with code ${code}; its last output:\n${child.recentOutput().split('\n').slice(-15).join('\n')}`);
    }
  });
  return child;
}

let exitCode = 0;
try {
  log(`data in ${path.relative(process.cwd(), dataDir)}; store :${ports.ferretdb}, temporal :${ports.temporal}, simulator :${ports.simulator}, api :${ports.api}`);
  let store = watchForCrash(await startStore());
  let temporal = watchForCrash(await startTemporal());
  const simulator = watchForCrash(node('simulator', 'simulator/server.ts'));
  await waitForPort('127.0.0.1', ports.simulator, simulator);
  let worker = watchForCrash(await startWorker());
  // The api as production runs it: from its build (scripts/lib/build-api.ts).
  await buildApi();
  const api = watchForCrash(supervise(startProcess('api', process.execPath, builtApiArgs, { cwd: projectRoot, env: environment })));
  await waitForPort('127.0.0.1', ports.api, api);

  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const accountAnswer = await request(`${origin}/admin/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'faults', balance_usd: BALANCE_USD }) });
  const account = (await accountAnswer.body.json()) as { id: string };
  const keyAnswer = await request(`${origin}/admin/accounts/${account.id}/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'faults' }) });
  const { key } = (await keyAnswer.body.json()) as { key: string };
  if (!account.id || !key) throw new Error('could not create the account and key');
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

  // The load: video submissions (one in five fails at the vendor), polls of accepted tasks,
  // chat calls, and a readiness probe, each on its own fixed schedule.
  const recorder = new CallRecorder(origin, CALL_TIMEOUT_MS);
  const acceptedIds: string[] = [];
  let submissions = 0;
  const stops = [
    every(1000 / VIDEOS_PER_SECOND, () => {
      const index = submissions++;
      const prompt = index % 5 === 4 ? `faults ${index} [sim:fail] [sim:delay=1]` : `faults ${index} [sim:delay=2]`;
      void recorder.call('POST video', 'POST', '/v1/video/generations', auth, { model: 'seedance-2.0', prompt, seconds: '4', metadata: { resolution: '480p' } }).then((answer) => {
        const taskId = (answer?.json as { task_id?: unknown } | null)?.task_id;
        if (answer?.status === 200 && typeof taskId === 'string') acceptedIds.push(taskId);
      });
    }),
    every(500, () => {
      const taskId = acceptedIds[Math.floor(Math.random() * acceptedIds.length)];
      if (taskId) void recorder.call('GET task', 'GET', `/v1/video/generations/${taskId}`, auth);
    }),
    every(1000, () => {
      void recorder.call('POST chat', 'POST', '/v1/chat/completions', auth, { model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'Say hello.' }] });
    }),
    every(1000, () => void recorder.call('GET readyz', 'GET', '/readyz', {})),
  ];

  const phases: string[] = [];
  const outagePhases = new Set<string>();
  const enter = (phase: string, outage = false) => {
    phases.push(phase);
    if (outage) outagePhases.add(phase);
    recorder.phase = phase;
    log(phase);
  };
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  enter('warm-up');
  await pause(WARM_UP_MS);

  enter('store down', true);
  await kill(store);
  await pause(OUTAGE_MS);
  store = watchForCrash(await startStore());
  enter('store recovery');
  await pause(RECOVERY_MS);

  enter('temporal down', true);
  await kill(temporal);
  await pause(OUTAGE_MS);
  temporal = watchForCrash(await startTemporal());
  enter('temporal recovery');
  await pause(RECOVERY_MS);

  enter('worker down');
  await kill(worker);
  await pause(OUTAGE_MS);
  worker = watchForCrash(await startWorker());
  enter('worker recovery');
  await pause(RECOVERY_MS);

  for (const stop of stops) stop();
  enter('drain');
  await recorder.settle();

  // Every accepted task must end; tasks whose submission was refused must end (or vanish) too,
  // so that a charge the sweeper would make later is seen here.
  const database = await connectDatabase(mongodbUri, databaseName);
  const drainStarted = Date.now();
  let tasks: AuditTask[] = [];
  const accepted = new Set(acceptedIds);
  let lastReport = Date.now();
  for (;;) {
    tasks = await database.db.collection<AuditTask & { account_id: string }>('tasks').find({ account_id: account.id }, { projection: { _id: 1, status: 1, price_micros: 1 } }).toArray();
    const open = tasks.filter((task) => task.status !== 'succeeded' && task.status !== 'failed');
    const missing = acceptedIds.filter((id) => !tasks.some((task) => task._id === id));
    if ((open.length === 0 && missing.length === 0) || Date.now() - drainStarted > DRAIN_MS) {
      log(`drained in ${((Date.now() - drainStarted) / 1000).toFixed(0)} s: ${open.length} tasks open (${open.filter((task) => accepted.has(task._id)).length} accepted), ${missing.length} accepted tasks missing`);
      break;
    }
    if (Date.now() - lastReport >= 15_000) {
      lastReport = Date.now();
      log(`waiting: ${open.length} of ${tasks.length} tasks not final yet`);
    }
    await pause(2_000);
  }
  // Spend leases go back some time after their account's last call; give them that.
  const leaseTimes = loadConfig(environment);
  await pause(Math.max(leaseTimes.SPEND_LEASE_IDLE_MS, leaseTimes.SPEND_LEASE_SMALL_IDLE_MS) + 3_000);
  const entries = await database.db.collection<AuditEntry & { account_id: string }>('ledger').find({ account_id: account.id }).toArray();
  await database.close();
  const audit = auditTasksAndLedger({ acceptedIds, tasks, entries });

  const calls = recorder.records.filter((record) => record.kind !== 'GET readyz');
  const all = totals(recorder.records);
  const bad5xx = calls.filter((record) => record.status >= 500 && !(record.status === 503 && record.errorShape));
  const unreadyInOutage = [...outagePhases].map((phase) => ({
    phase,
    unready: recorder.records.some((record) => record.phase === phase && record.kind === 'GET readyz' && record.status === 503),
  }));
  const apiCrashed = unexpectedExits.some((name) => name.startsWith('api'));
  const usd = (micros: number) => `$${(micros / 1e6).toFixed(6)}`;
  const balanceAddsUp =
    audit.totals.balance_micros + audit.totals.held_micros + audit.totals.spent_micros === audit.creditedMicros &&
    audit.totals.spent_micros === audit.videoCapturedMicros + audit.otherSpentMicros &&
    audit.videoCapturedMicros === audit.succeededPriceMicros &&
    audit.totals.held_micros === 0;

  console.log(`\nFramegate under faults: ${VIDEOS_PER_SECOND} video submissions/s, 2 task polls/s, 1 chat call/s, /readyz 1/s; every call times out after ${CALL_TIMEOUT_MS / 1000} s (= hung).`);
  console.log(`Outages (SIGKILL, restart on the same port and data after ${OUTAGE_MS / 1000} s): store (FerretDB), Temporal dev server, worker.\n`);
  console.log(phaseTable(recorder.records, phases.filter((phase) => phase !== 'drain')));
  console.log(`\nWhy calls were answered 503:\n${unavailableReasons(recorder.records, phases)}\n`);
  if (bad5xx.length > 0) console.log(`5xx other than 503 in the spec's body: ${bad5xx.map((record) => `${record.phase}/${record.kind} ${record.status}${record.code ? ` ${record.code}` : ''}`).join('; ')}`);
  console.log(`/readyz unready during: ${unreadyInOutage.map(({ phase, unready }) => `${phase} ${unready ? 'yes' : 'NO'}`).join(', ')}`);
  console.log(`calls: ${all.requests}, hung: ${all.hung}, other 5xx: ${all.other5xx}, no answer: ${all.noAnswer}, slowest answer ${all.maxMs.toFixed(0)} ms`);
  console.log('');
  console.log(`submitted (video)      ${submissions}`);
  console.log(`accepted               ${audit.accepted}`);
  console.log(`succeeded              ${audit.succeeded}`);
  console.log(`failed                 ${audit.failed}`);
  console.log(`lost                   ${audit.lost.length}${audit.lost.length ? `  (${audit.lost.slice(0, 5).join(', ')}${audit.lost.length > 5 ? ', …' : ''})` : ''}`);
  console.log(`double-charged         ${audit.doubleCharged.length}${audit.doubleCharged.length ? `  (${audit.doubleCharged.slice(0, 5).join(', ')})` : ''}`);
  console.log(`holds never settled    ${audit.unsettled.length}`);
  console.log(`refused but stored     ${audit.unacknowledged} (tasks whose submission got no 200), charged: ${audit.unacknowledgedCharged.length}`);
  console.log(`api crashed            ${apiCrashed ? 'yes' : 'no'}`);
  console.log(`other unexpected exits ${unexpectedExits.filter((name) => !name.startsWith('api')).join(', ') || 'none'}`);
  console.log(
    `balance                credited ${usd(audit.creditedMicros)} = balance ${usd(audit.totals.balance_micros)} + held ${usd(audit.totals.held_micros)} + spent ${usd(audit.totals.spent_micros)}; ` +
      `spent = video ${usd(audit.videoCapturedMicros)} (succeeded tasks' prices ${usd(audit.succeededPriceMicros)}, ${audit.succeeded} × ${usd(VIDEO_PRICE_MICROS)}) + chat ${usd(audit.otherSpentMicros)}: ${balanceAddsUp ? 'adds up' : 'DOES NOT ADD UP'}`,
  );

  const failures: string[] = [];
  if (audit.lost.length > 0) failures.push(`${audit.lost.length} lost`);
  if (audit.doubleCharged.length > 0) failures.push(`${audit.doubleCharged.length} double-charged`);
  if (audit.unacknowledgedCharged.length > 0) failures.push(`${audit.unacknowledgedCharged.length} charged for refused submissions`);
  if (audit.unsettled.length > 0) failures.push(`${audit.unsettled.length} holds never settled`);
  if (all.hung > 0) failures.push(`${all.hung} hung calls`);
  if (bad5xx.length > 0) failures.push(`${bad5xx.length} 5xx other than 503 in the spec's body`);
  if (apiCrashed) failures.push('the api crashed');
  if (unexpectedExits.length > 0 && !apiCrashed) failures.push(`unexpected exits: ${unexpectedExits.join(', ')}`);
  if (!balanceAddsUp) failures.push('the balance does not add up');
  if (unreadyInOutage.some(({ unready }) => !unready)) failures.push('/readyz stayed ready during an outage');
  if (audit.accepted === 0) failures.push('nothing was accepted');
  console.log(failures.length === 0 ? '\nPASS' : `\nFAIL: ${failures.join('; ')} (logs in ${path.relative(process.cwd(), dataDir)}/logs)`);
  exitCode = failures.length === 0 ? 0 : 1;
} catch (error) {
  console.error(`[faults] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  exitCode = 1;
} finally {
  await stopEverything();
  if (exitCode === 0 && !process.env.FAULTS_KEEP_DATA) rmSync(dataDir, { recursive: true, force: true });
}
process.exit(exitCode);
