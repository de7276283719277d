import { NativeConnection } from '@temporalio/worker';
import { loadCatalog } from '../core/catalog.ts';
import { loadConfig, publicBaseUrl, webhookTimeoutMs } from '../core/config.ts';
import { exitForSetting, settingsOrExit, untilConnected } from '../core/process-startup.ts';
import { createTemporalHandle } from '../core/temporal-client.ts';
import { connectDatabase } from '../store/database.ts';
import { BudgetLeaseStore } from '../store/budget-leases.ts';
import { IdempotencyStore } from '../store/idempotency.ts';
import { Ledger } from '../store/ledger.ts';
import { RateLimitBlockStore } from '../store/rate-limit-blocks.ts';
import { KeyCreationStore } from '../store/key-creations.ts';
import { SweeperCursorStore } from '../store/sweeper-cursors.ts';
import { TaskStore } from '../store/tasks.ts';
import { webhookTaskQueue } from '../core/video-task.ts';
import { createVideoWorker } from './create-worker.ts';
import { startMetricsServer } from './metrics-server.ts';
import { startSweeper } from './sweeper.ts';
import { TaskPruning } from './task-pruning.ts';
import { TaskRetention } from '../store/task-retention.ts';
import { installTemporalRuntime } from './temporal-runtime.ts';
import { workerLog } from './worker-log.ts';

// The worker process. The Temporal runtime traps SIGINT/SIGTERM and shuts the worker down
// gracefully: running activities finish (or time out) and the process exits.
const config = settingsOrExit('worker', () => loadConfig());
const catalog = settingsOrExit('worker', () => loadCatalog(config.CATALOG_FILE));
const log = workerLog(config.LOG_LEVEL);
// Where the worker is and that it polls, whatever LOG_LEVEL: what `npm start` and an operator
// wait for.
const announce = workerLog('info');
// Before the first Temporal connection, which would install the SDK's runtime with its defaults.
const temporalSdkMetricsUrl = await installTemporalRuntime({ log, logLevel: config.LOG_LEVEL, metrics: config.WORKER_METRICS_PORT !== undefined });
const metricsServer =
  config.WORKER_METRICS_PORT === undefined
    ? undefined
    : await startMetricsServer({ host: config.WORKER_METRICS_HOST, port: config.WORKER_METRICS_PORT, ...(temporalSdkMetricsUrl ? { temporalSdkMetricsUrl } : {}), ...(config.METRICS_TOKEN ? { token: config.METRICS_TOKEN } : {}) }).catch(
        (error: NodeJS.ErrnoException) => exitForSetting('worker', `WORKER_METRICS_PORT: cannot listen on ${config.WORKER_METRICS_HOST}:${config.WORKER_METRICS_PORT} (${error.code ?? error.message})`),
      );
if (metricsServer) announce.info({ url: metricsServer.url }, `worker metrics at ${metricsServer.url}`);
const database = await untilConnected('worker', 'the store (MONGODB_URI)', () => connectDatabase(config.MONGODB_URI, config.MONGODB_DB));
const connection = await untilConnected('worker', `Temporal at ${config.TEMPORAL_ADDRESS}`, () => NativeConnection.connect({ address: config.TEMPORAL_ADDRESS }));
const worker = await createVideoWorker({
  connection,
  namespace: config.TEMPORAL_NAMESPACE,
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  database,
  catalog,
  publicBaseUrl: publicBaseUrl(config),
  outboundAllowlist: config.OUTBOUND_ALLOWLIST,
  webhookTimeoutMs: webhookTimeoutMs(config, (message) => log.warn(message)),
}).catch((error: unknown) => {
  // A setting to fix, not an outage to wait out: one line, as for the others.
  if (error instanceof Error && /NamespaceNotFound|Namespace \S+ is not found/.test(error.message)) {
    return exitForSetting('worker', `TEMPORAL_NAMESPACE: Temporal at ${config.TEMPORAL_ADDRESS} has no namespace '${config.TEMPORAL_NAMESPACE}'`);
  }
  throw error;
});
const temporal = createTemporalHandle({ address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE });
const stopSweeper = startSweeper({
  tasks: new TaskStore(database.db),
  ledger: new Ledger(database.db),
  leases: new BudgetLeaseStore(database.db),
  rateLimitBlocks: new RateLimitBlockStore(database.db),
  idempotency: new IdempotencyStore(database.db),
  keyCreations: new KeyCreationStore(database.db),
  cursors: new SweeperCursorStore(database.db),
  pruning: new TaskPruning(new TaskRetention(database.db), config.TASK_RETENTION_DAYS, (message) => log.info(message)),
  client: temporal.client,
  taskQueue: config.TEMPORAL_TASK_QUEUE,
  log: (message) => log.info(message),
});

const webhooksQueue = webhookTaskQueue(config.TEMPORAL_TASK_QUEUE);
announce.info(
  { taskQueue: config.TEMPORAL_TASK_QUEUE, webhookTaskQueue: webhooksQueue },
  `worker polling task queue ${config.TEMPORAL_TASK_QUEUE} (and its webhooks' ${webhooksQueue}) on ${config.TEMPORAL_ADDRESS}`,
);
try {
  await worker.run();
} finally {
  stopSweeper();
  await Promise.allSettled([connection.close(), temporal.close(), database.close(), metricsServer?.close()]);
}
