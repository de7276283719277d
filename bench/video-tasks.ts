import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import { Pool } from 'undici';
import { buildApp } from '../api/app.ts';
import { loadCatalog } from '../core/catalog.ts';
import { loadConfig } from '../core/config.ts';
import { createTemporalHandle } from '../core/temporal-client.ts';
import { projectRoot, provision, startFerretDb, startTemporalDevServer } from '../scripts/lib/engines.ts';
import { freePort } from '../scripts/lib/processes.ts';
import { buildSimulator } from '../simulator/app.ts';
import { connectDatabase } from '../store/database.ts';
import { startWebhookReceiver } from '../test/helpers/webhook-receiver.ts';
import { createVideoWorker } from '../worker/create-worker.ts';
import { describeLoad, percentile, runLoad } from './lib/stats.ts';

// `npm run bench:video`: figures for the video path on this machine, against real engines.
//  1. submission latency and throughput, beside raw client.workflow.start on the same server;
//  2. GET /v1/video/generations/{id} throughput;
//  3. end-to-end time from submission to succeeded with an instant simulator;
//  4. webhook delivery lag after the final state.
// Benchmarks print figures; nothing here asserts a speed (machines are noisy).

const SUBMISSIONS = Number(process.env.BENCH_SUBMISSIONS || 200);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 16);

provision();
const dataDir = path.join(projectRoot, `.data/bench-${process.pid}`);
const ferretPort = await freePort();
const temporalPort = await freePort();
const ferretdb = process.env.MONGODB_URI ? undefined : await startFerretDb({ port: ferretPort, dataDir });
const temporalServer = process.env.TEMPORAL_ADDRESS ? undefined : await startTemporalDevServer({ port: temporalPort });
const mongodbUri = process.env.MONGODB_URI || `mongodb://127.0.0.1:${ferretPort}/`;
const temporalAddress = process.env.TEMPORAL_ADDRESS || `127.0.0.1:${temporalPort}`;

const simulator = buildSimulator();
await simulator.listen({ host: '127.0.0.1', port: 0 });
const simulatorUrl = `http://127.0.0.1:${(simulator.server.address() as AddressInfo).port}`;
const apiPort = await freePort();
const baseUrl = `http://127.0.0.1:${apiPort}`;
const config = loadConfig({
  ADMIN_TOKEN: 'bench-admin-token-0123456789',
  MONGODB_URI: mongodbUri,
  MONGODB_DB: `bench_${process.pid}`,
  TEMPORAL_ADDRESS: temporalAddress,
  TEMPORAL_TASK_QUEUE: `bench-${process.pid}`,
  SIMULATOR_URL: simulatorUrl,
  PORT: String(apiPort),
  PUBLIC_BASE_URL: baseUrl,
  LOG_LEVEL: 'silent',
  OUTBOUND_ALLOWLIST: 'loopback',
});
const catalog = loadCatalog(config.CATALOG_FILE, { SIMULATOR_URL: simulatorUrl });
const database = await connectDatabase(config.MONGODB_URI, config.MONGODB_DB);
const temporal = createTemporalHandle({ address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE });
const app = await buildApp({ config, catalog, database, temporal, logger: false });
await app.listen({ host: '127.0.0.1', port: apiPort });
const connection = await NativeConnection.connect({ address: temporalAddress });

const admin = { authorization: `Bearer ${config.ADMIN_TOKEN}`, 'content-type': 'application/json' };
const pool = new Pool(baseUrl, { connections: CONCURRENCY * 2 });
async function call(method: 'GET' | 'POST', pathname: string, headers: Record<string, string>, body?: unknown) {
  const response = await pool.request({ method, path: pathname, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.statusCode, json: (await response.body.json()) as Record<string, any> };
}
const account = (await call('POST', '/admin/accounts', admin, { name: 'bench', balance_usd: 1_000_000 })).json;
const key = (await call('POST', `/admin/accounts/${account.id}/keys`, admin, { name: 'bench' })).json.key as string;
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const body = { model: 'seedance-2.0', prompt: 'bench [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } };

console.log(`\nFramegate video benchmarks (${SUBMISSIONS} operations, concurrency ${CONCURRENCY}, store ${ferretdb ? 'FerretDB' : 'MONGODB_URI'})\n`);

// 1. Submission without a worker (workflows only start), beside raw workflow.start.
await runLoad(30, 4, async () => (await call('POST', '/v1/video/generations', auth, body)).status === 200); // warm-up
const taskIds: string[] = [];
const submissions = await runLoad(SUBMISSIONS, CONCURRENCY, async () => {
  const answer = await call('POST', '/v1/video/generations', auth, body);
  if (answer.status === 200) taskIds.push(answer.json.task_id);
  return answer.status === 200;
});
const rawStarts = await runLoad(SUBMISSIONS, CONCURRENCY, async (index) => {
  await temporal.client.workflow.start('videoTaskWorkflow', { workflowId: `raw-${process.pid}-${index}`, taskQueue: `raw-${process.pid}`, args: [{}] });
  return true;
});
console.log(describeLoad('POST /v1/video/generations', submissions));
console.log(describeLoad('raw client.workflow.start', rawStarts));
console.log(
  `  ratio gateway/raw: p50 ${(percentile(submissions.latenciesMs, 0.5) / percentile(rawStarts.latenciesMs, 0.5)).toFixed(2)}×, ` +
    `throughput ${(submissions.perSecond / rawStarts.perSecond).toFixed(2)}×`,
);

// 2. Polling throughput.
const polls = await runLoad(SUBMISSIONS * 3, CONCURRENCY, async (index) => (await call('GET', `/v1/video/generations/${taskIds[index % taskIds.length]}`, auth)).status === 200);
console.log(describeLoad('GET /v1/video/generations/{id}', polls));

// 3 and 4. With a worker: end-to-end time, and webhook lag after the final state. The tasks
// submitted above are terminated first, so they do not compete with the measured ones.
await Promise.all(taskIds.map((taskId) => temporal.client.workflow.getHandle(taskId).terminate('benchmark cleanup').catch(() => undefined)));
const worker = await createVideoWorker({
  connection,
  namespace: 'default',
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  database,
  catalog,
  publicBaseUrl: baseUrl,
  outboundAllowlist: 'loopback',
});
const running = worker.run();
const receiver = await startWebhookReceiver([200]);
const endToEnd: number[] = [];
const lags: number[] = [];
const E2E_TASKS = Number(process.env.BENCH_E2E_TASKS || 40);
await runLoad(E2E_TASKS, 4, async () => {
  const started = performance.now();
  const answer = await call('POST', '/v1/video/generations', auth, { ...body, metadata: { ...body.metadata, callback_url: receiver.url } });
  for (;;) {
    const task = await call('GET', `/v1/video/generations/${answer.json.task_id}`, auth);
    if (task.json.status === 'succeeded') break;
    // A realistic poll interval: polling every 20 ms from 4 clients alone saturates FerretDB.
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  endToEnd.push(performance.now() - started);
  return true;
});
await receiver.waitFor(E2E_TASKS, 60_000);
for (const delivery of receiver.received) {
  const taskId = JSON.parse(delivery.body).task_id as string;
  const task = await database.db.collection('tasks').findOne({ _id: taskId as never });
  if (task) lags.push(delivery.at - (task.updated_at as Date).getTime());
}
console.log(`end-to-end submit → succeeded (instant vendor)    p50 ${percentile(endToEnd, 0.5).toFixed(0)} ms   p99 ${percentile(endToEnd, 0.99).toFixed(0)} ms   (${E2E_TASKS} tasks, 4 at a time)`);
console.log(`webhook lag after the final snapshot             p50 ${percentile(lags, 0.5).toFixed(0)} ms   p99 ${percentile(lags, 0.99).toFixed(0)} ms`);

worker.shutdown();
await running;
await receiver.close();
await pool.close();
await app.close();
await connection.close();
await temporal.close();
await database.db.dropDatabase();
await database.close();
await simulator.close();
await temporalServer?.stop();
await ferretdb?.stop();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
