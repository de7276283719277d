import type { AddressInfo } from 'node:net';
import { NativeConnection } from '@temporalio/worker';
import { loadCatalog } from '../../core/catalog.ts';
import type { FailureLimit } from '../../core/failures-by-address.ts';
import { freePort } from '../../scripts/lib/processes.ts';
import { buildSimulator } from '../../simulator/app.ts';
import type { VideoVendor } from '../../vendors/types.ts';
import { createVideoWorker, type VideoWorker } from '../../worker/create-worker.ts';
import { startTestApp, type TestApp } from './app.ts';
import { testTemporalAddress, uniqueName } from './engines.ts';
import { createVendorLookup } from '../../core/vendor-lookup.ts';

export interface VideoStack extends TestApp {
  baseUrl: string;
  simulatorUrl: string;
  taskQueue: string;
  worker?: VideoWorker;
}

/** Simulator, api (listening on an ephemeral port) and, unless told otherwise, an in-process
 * worker on a task queue of its own. */
export async function startVideoStack(
  label: string,
  options: { withWorker?: boolean; deadlineSeconds?: number; outboundAllowlist?: string; apiOutboundAllowlist?: string; answerGraceMs?: number; adminTokenGuesses?: FailureLimit } = {},
): Promise<VideoStack> {
  const simulator = buildSimulator();
  await simulator.listen({ host: '127.0.0.1', port: 0 });
  const simulatorUrl = `http://127.0.0.1:${(simulator.server.address() as AddressInfo).port}`;
  const taskQueue = uniqueName('video-test');
  // The port is chosen first so the api's public base URL (inside task JSON) is the real one.
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const harness = await startTestApp(label, {
    SIMULATOR_URL: simulatorUrl,
    TEMPORAL_TASK_QUEUE: taskQueue,
    PORT: String(port),
    PUBLIC_BASE_URL: baseUrl,
    VIDEO_TASK_DEADLINE_SECONDS: String(options.deadlineSeconds ?? 3600),
    ...(options.apiOutboundAllowlist === undefined ? {} : { OUTBOUND_ALLOWLIST: options.apiOutboundAllowlist }),
  }, options.adminTokenGuesses ? { adminTokenGuesses: options.adminTokenGuesses } : {});
  await harness.app.listen({ host: '127.0.0.1', port });

  if (options.withWorker === false) {
    return {
      ...harness,
      baseUrl,
      simulatorUrl,
      taskQueue,
      async close() {
        await simulator.close();
        await harness.close();
      },
    };
  }
  const stackWithoutWorker = { ...harness, baseUrl, simulatorUrl, taskQueue };
  const started = await startStackWorker(stackWithoutWorker, { outboundAllowlist: options.outboundAllowlist, answerGraceMs: options.answerGraceMs });
  return {
    ...stackWithoutWorker,
    worker: started.worker,
    async close() {
      await started.stop();
      await simulator.close();
      await harness.close();
    },
  };
}

/** An in-process worker on the stack's task queue and store (as startVideoStack starts one),
 * for tests that start it late or swap the vendors. */
export async function startStackWorker(
  stack: Pick<VideoStack, 'database' | 'simulatorUrl' | 'baseUrl' | 'taskQueue'>,
  options: {
    outboundAllowlist?: string;
    /** Methods that replace the simulator's vendors' own (a vendor that fails in a given way). */
    vendorOverrides?: (real: VideoVendor) => Partial<VideoVendor>;
    answerGraceMs?: number;
    webhookSlots?: number;
  } = {},
): Promise<{ worker: VideoWorker; stop: () => Promise<void> }> {
  const connection = await NativeConnection.connect({ address: testTemporalAddress() });
  const catalog = loadCatalog('config/catalog.local.json', { SIMULATOR_URL: stack.simulatorUrl });
  const { vendorOverrides } = options;
  const real = createVendorLookup(catalog);
  const vendorFor =
    vendorOverrides &&
    ((upstream: string): VideoVendor => {
      const vendor = real(upstream);
      const own: VideoVendor = { start: (request, taskId) => vendor.start(request, taskId), status: (id) => vendor.status(id), cancel: (id) => vendor.cancel(id) };
      if (vendor.openContent) own.openContent = (id) => vendor.openContent!(id);
      return { ...own, ...vendorOverrides(vendor) };
    });
  const worker = await createVideoWorker({
    connection,
    namespace: 'default',
    taskQueue: stack.taskQueue,
    database: stack.database,
    catalog,
    publicBaseUrl: stack.baseUrl,
    outboundAllowlist: options.outboundAllowlist ?? 'loopback',
    webhookTimeoutMs: 2_000,
    ...(options.answerGraceMs === undefined ? {} : { answerGraceMs: options.answerGraceMs }),
    ...(vendorFor ? { vendorFor } : {}),
    ...(options.webhookSlots === undefined ? {} : { webhookSlots: options.webhookSlots }),
  });
  const running = worker.run();
  return {
    worker,
    async stop() {
      // A test may have begun the shutdown itself (to let an activity finish on a stopping worker).
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}
