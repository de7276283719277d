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
import { WORKER_STOP_MS, webhookTaskQueue } from '../core/video-task.ts';

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
  /** Webhook attempts at once (WEBHOOK_SLOTS); tests make a backlog with fewer. */
  webhookSlots?: number;
}

/** Webhook attempts at once per worker process. Each waits on a receiver (up to 15 s, 30 s at
 * most), so many fit; they have slots apart from the task queue's 200, so receivers slow for many
 * tasks at once hold up other webhooks, never holds, submissions or status reads. */
const WEBHOOK_SLOTS = 100;

/** The task queue's worker (workflows, vendor calls, bookkeeping) and the webhook queue's
 * (attempts alone), run and stopped together: one process serves both. */
export class VideoWorker {
  constructor(private readonly workers: readonly Worker[]) {}

  /** Until both stop; if one fails, the other is stopped too and the failure thrown. */
  async run(): Promise<void> {
    const runs = this.workers.map((worker) => worker.run());
    try {
      await Promise.all(runs);
    } catch (error) {
      this.shutdown();
      await Promise.allSettled(runs);
      throw error;
    }
  }

  /** Begins both workers' stop (activities under way finish first, up to WORKER_STOP_MS). */
  shutdown(): void {
    for (const worker of this.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
  }

  /** The task queue worker's state. */
  getState(): ReturnType<Worker['getState']> {
    return this.workers[0]!.getState();
  }
}

/** The worker for the video task queue: the bundled workflows plus activities wired to the
 * store, and beside it the worker for the webhook attempts its workflows send. */
export async function createVideoWorker(options: VideoWorkerOptions): Promise<VideoWorker> {
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
  const tasks = await Worker.create({
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
  const webhooks = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: webhookTaskQueue(options.taskQueue),
    activities: { deliverTaskWebhook: activities.deliverTaskWebhook },
    maxConcurrentActivityTaskExecutions: options.webhookSlots ?? WEBHOOK_SLOTS,
    shutdownForceTime: WORKER_STOP_MS,
  });
  return new VideoWorker([tasks, webhooks]);
}
