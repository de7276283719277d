import { createRequire } from 'node:module';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.ts';
import type { Catalog } from '../core/catalog.ts';
import { createGuardedDispatcher, parseOutboundAllowlist } from '../core/outbound-guard.ts';
import { createVendorLookup } from '../core/vendor-lookup.ts';
import type { VideoVendor } from '../vendors/types.ts';
import { AccountStore } from '../store/accounts.ts';
import type { Database } from '../store/database.ts';
import { Ledger } from '../store/ledger.ts';
import { TaskStore } from '../store/tasks.ts';
import { UsageStore } from '../store/usage.ts';
import { WORKER_STOP_MS } from '../core/video-task.ts';

const require = createRequire(import.meta.url);

export interface VideoWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  database: Database;
  catalog: Catalog;
  publicBaseUrl: string;
  outboundAllowlist: string;
  webhookTimeoutMs?: number;
  /** How long a submission's api has to claim its task (core/video-task.ts); tests shorten it. */
  answerGraceMs?: number;
  /** Tests may swap the vendor lookup; production uses the catalog's adapters. */
  vendorFor?: (upstream: string) => VideoVendor;
}

/** The worker for the video task queue: the bundled workflows plus activities wired to the store. */
export async function createVideoWorker(options: VideoWorkerOptions): Promise<Worker> {
  const activities = createActivities({
    tasks: new TaskStore(options.database.db),
    accounts: new AccountStore(options.database.db),
    ledger: new Ledger(options.database.db),
    usage: new UsageStore(options.database.db),
    vendorFor: options.vendorFor ?? createVendorLookup(options.catalog),
    webhookDispatcher: createGuardedDispatcher({ allowlist: parseOutboundAllowlist(options.outboundAllowlist) }),
    publicBaseUrl: options.publicBaseUrl,
    webhookTimeoutMs: options.webhookTimeoutMs,
    answerGraceMs: options.answerGraceMs,
  });
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowsPath: require.resolve('../workflows/index.ts'),
    activities,
    // Vendor polls are short I/O waits: many can run at once without one slow vendor
    // holding up the others.
    maxConcurrentActivityTaskExecutions: 200,
    // On SIGTERM, activities under way finish first (a vendor call takes at most 60 s, a webhook
    // attempt 45 s); one still running after WORKER_STOP_MS (a vendor trickling its body) is
    // abandoned, and Temporal retries it elsewhere, so a stop is never held open for good.
    shutdownForceTime: WORKER_STOP_MS,
  });
}
