import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createAccount, createKey } from '../helpers/app.ts';
import { videoClient } from '../helpers/video-client.ts';
import { startStackWorker, startVideoStack, type VideoStack } from '../helpers/video-stack.ts';

// One account whose receiver answers slowly must not hold up another account's webhook for as
// long as its whole backlog takes. Each task's workflow starts with its account as Temporal's
// fairness key (core/video-task.ts taskPriority), which the webhook attempts inherit, and the dev
// server runs with fairness on (scripts/lib/engines.ts): a backlog on the webhook queue is handed
// out to the accounts in turn. The worker here has a single webhook slot, so a backlog forms at
// once; first come, first served, the other account's webhook would wait for all of it.

const SLOW_ANSWER_MS = 1_000;
const SLOW_TASKS = 10;

/** A receiver that answers `/slow/…` after SLOW_ANSWER_MS and anything else at once, and notes
 * the order in which paths first arrived (a retry, should one attempt time out on a loaded
 * machine, is not a new arrival). */
async function startReceiver() {
  const arrivals: string[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      if (!arrivals.includes(request.url!)) arrivals.push(request.url!);
      setTimeout(() => response.writeHead(200).end('ok'), request.url!.startsWith('/slow/') ? SLOW_ANSWER_MS : 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    arrivals,
    async waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`webhooks seen so far: ${arrivals.join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('webhooks between accounts (real Temporal with fairness, store and simulator)', () => {
  let stack: VideoStack;
  let stopWorker: () => Promise<void>;
  before(async () => {
    stack = await startVideoStack('webhook-fairness', { withWorker: false });
    stopWorker = (await startStackWorker(stack, { webhookSlots: 1 })).stop;
  });
  after(async () => {
    await stopWorker();
    await stack.close();
  });

  async function newCustomer() {
    const account = await createAccount(stack.app, { name: 'fairness', balance_usd: 20 });
    return videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
  }

  it("an account's webhook waits its turn behind another account's slow receiver, not behind its whole backlog", async () => {
    const receiver = await startReceiver();
    try {
      const busy = await newCustomer();
      const other = await newCustomer();
      for (let index = 0; index < SLOW_TASKS; index++) {
        const submitted = await busy.submit({ model: 'seedance-2.0', prompt: `busy ${index} [sim:delay=0]`, metadata: { callback_url: `${receiver.origin}/slow/${index}` } });
        assert.equal(submitted.status, 200, JSON.stringify(submitted.json));
      }
      // The busy account's backlog is there: its first webhook holds the only slot.
      await receiver.waitUntil(() => receiver.arrivals.length > 0, 30_000);
      const submitted = await other.submit({ model: 'seedance-2.0', prompt: 'other [sim:delay=0]', metadata: { callback_url: `${receiver.origin}/other` } });
      assert.equal(submitted.status, 200, JSON.stringify(submitted.json));
      // Its task is final, so its webhook is scheduled (or about to be), behind the busy backlog.
      assert.equal((await other.waitForFinal(submitted.json.task_id)).status, 'succeeded');
      const busyDone = receiver.arrivals.length;
      assert.ok(SLOW_TASKS - busyDone >= 4, `a backlog to wait behind: only ${SLOW_TASKS - busyDone} of the busy account's webhooks were left`);
      await receiver.waitUntil(() => receiver.arrivals.includes('/other'), 30_000);
      // In turns, at most the busy account's attempt under way and one handed out as the other's
      // was scheduled go first; first come, first served, every one left would.
      const busyBetween = receiver.arrivals.indexOf('/other') - busyDone;
      assert.ok(busyBetween <= 2, `the other account's webhook waited for ${busyBetween} of the busy account's ${SLOW_TASKS - busyDone} left: ${receiver.arrivals.join(', ')}`);
      // And the busy account loses nothing: every one of its webhooks arrives.
      await receiver.waitUntil(() => receiver.arrivals.length === SLOW_TASKS + 1, 30_000);
      assert.deepEqual(receiver.arrivals.filter((path) => path.startsWith('/slow/')).sort(), Array.from({ length: SLOW_TASKS }, (_, index) => `/slow/${index}`).sort());
    } finally {
      await receiver.close();
    }
  });
});
