import assert from 'node:assert/strict';
import type { Principal } from '../../api/plugins/api-key-auth.ts';
import { VideoTaskService } from '../../api/services/video-tasks.ts';
import { loadCatalog, type Catalog } from '../../core/catalog.ts';
import { HostNameCheck, dnsServers } from '../../core/host-names.ts';
import { parseOutboundAllowlist } from '../../core/outbound-guard.ts';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { TaskStore } from '../../store/tasks.ts';
import { startVideoStack, type VideoStack } from './video-stack.ts';

// What the tests of video submissions that fail halfway share (abandoned-submission, and
// hold-queue for the holds that come late or not at all): one video stack whose worker waits
// ANSWER_GRACE_MS, not a minute, for an api to claim its task for the caller, and the api's
// VideoTaskService over stores a test swaps for failing ones.

/** The tests' callbacks are on this machine (and never called), as `npm start` allows. */
export const LOOPBACK = parseOutboundAllowlist('loopback');
/** Names judged as the test suite's DNS server answers them (scripts/lib/test-dns-server.ts). */
export const LOOPBACK_NAMES = new HostNameCheck(LOOPBACK, dnsServers(process.env.DNS_SERVERS ?? ''));

export const body = { model: 'seedance-2.0', prompt: 'halfway [sim:delay=0]', seconds: '4', metadata: { resolution: '480p' } };
export const PRICE = 160_000;
export const ANSWER_GRACE_MS = 3_000;

/** Polls `check` every 50 ms; fails naming `what` (and what `describe` adds) after `timeoutMs`. */
export async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000, describe?: () => Promise<string>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() >= deadline) assert.fail(`never: ${what}${describe ? ` (${await describe()})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export interface HalfwaySubmissions {
  stack: VideoStack;
  catalog: Catalog;
  accounts: AccountStore;
  tasks: TaskStore;
  ledger: Ledger;
  /** The api's service, its holds due within 2 s and a queue stalled after 1 s. */
  service(overrides?: { ledger?: Ledger; tasks?: TaskStore }): VideoTaskService;
  /** A new account with `balanceMicros` (1 dollar unless told), and a key on it. */
  fundedPrincipal(name: string, balanceMicros?: number): Promise<Principal>;
}

export async function startHalfwaySubmissions(label: string): Promise<HalfwaySubmissions> {
  const stack = await startVideoStack(label, { answerGraceMs: ANSWER_GRACE_MS });
  const catalog = loadCatalog('config/catalog.local.json', { SIMULATOR_URL: stack.simulatorUrl });
  const accounts = new AccountStore(stack.database.db);
  const tasks = new TaskStore(stack.database.db);
  const ledger = new Ledger(stack.database.db);
  return {
    stack, catalog, accounts, tasks, ledger,
    service: (overrides = {}) =>
      new VideoTaskService({
        holdDeadlineMs: 2_000,
        stalledAfterMs: 1_000,
        catalog,
        tasks: overrides.tasks ?? tasks,
        ledger: overrides.ledger ?? ledger,
        accounts,
        temporal: stack.temporal.client,
        taskQueue: stack.taskQueue,
        deadlineSeconds: 600,
        outboundAllowlist: LOOPBACK,
        hostNames: LOOPBACK_NAMES,
      }),
    fundedPrincipal: async (name, balanceMicros = 1_000_000) => {
      const account = await accounts.create({ name, balanceMicros });
      return { accountId: account._id, keyId: `key_${name}`, models: null };
    },
  };
}
