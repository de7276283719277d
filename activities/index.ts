import type { Dispatcher } from 'undici';
import type { AccountStore } from '../store/accounts.ts';
import type { Ledger } from '../store/ledger.ts';
import type { TaskStore } from '../store/tasks.ts';
import type { UsageStore } from '../store/usage.ts';
import { createBillingActivities } from './billing.ts';
import { createSnapshotActivities } from './snapshots.ts';
import { createVendorActivities, type VendorLookup } from './vendor.ts';
import { createWebhookActivities } from './webhooks.ts';

export interface ActivityDependencies {
  tasks: TaskStore;
  accounts: AccountStore;
  ledger: Ledger;
  usage: UsageStore;
  vendorFor: VendorLookup;
  /** Guarded dispatcher for caller-supplied URLs (refuses internal addresses). */
  webhookDispatcher: Dispatcher;
  publicBaseUrl: string;
  webhookTimeoutMs?: number;
  /** How long a submission's api has to claim its task (core/video-task.ts); tests shorten it. */
  answerGraceMs?: number;
}

/** Every activity the video-task workflow uses; workflows proxy `ReturnType<typeof createActivities>`. */
export function createActivities(deps: ActivityDependencies) {
  return {
    ...createVendorActivities(deps.vendorFor, deps.tasks),
    ...createBillingActivities(deps),
    ...createSnapshotActivities(deps),
    ...createWebhookActivities({
      tasks: deps.tasks,
      accounts: deps.accounts,
      dispatcher: deps.webhookDispatcher,
      publicBaseUrl: deps.publicBaseUrl,
      timeoutMs: deps.webhookTimeoutMs,
    }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
