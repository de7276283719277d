import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { buildSimulator } from '../../simulator/app.ts';
import { AccountStore } from '../../store/accounts.ts';
import { UsageStore } from '../../store/usage.ts';
import { bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/engines.ts';
import { expectedChatMicros } from '../helpers/openai-stack.ts';

// Two api processes serve one small account (below the $1 a lease holds at least), with six
// chat calls at a time whose worst cases together come near the balance: every call the account
// can afford is served. A review saw up to 9 of 96 such calls answered 503 "Too many concurrent
// calls on this account" and up to 3 answered 403, though the account could afford each one
// (README, spend leases; api/services/billing/account-budgets.ts, shared-accounts.ts).

const CONCURRENCY = 6;
/** Per balance. */
const CALLS = 48;

/** Which process serves each call: a fixed pseudo-random sequence (a load balancer's choice),
 * so runs differ only in timing. */
function processChoices(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    // xorshift32
    state = (state ^ (state << 13)) >>> 0;
    state = (state ^ (state >>> 17)) >>> 0;
    state = (state ^ (state << 5)) >>> 0;
    return (state >>> 7) & 1;
  };
}

describe('a small account shared by two api processes under concurrent calls', () => {
  const simulator = buildSimulator();
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let first: TestApp;
  let second: TestApp;
  let closed = false;

  before(async () => {
    await simulator.listen({ host: '127.0.0.1', port: 0 });
    const simulatorUrl = `http://127.0.0.1:${(simulator.server.address() as AddressInfo).port}`;
    database = await testDatabase('shared_small');
    // Production's idle times: a shared account's lease is not a small one, a first lease of
    // the whole balance neither.
    const settings = { SIMULATOR_URL: simulatorUrl, SPEND_LEASE_IDLE_MS: '5000', SPEND_LEASE_SMALL_IDLE_MS: '300000' };
    first = await startTestApp('shared_small_first', settings, { database });
    second = await startTestApp('shared_small_second', settings, { database });
  });
  after(async () => {
    if (!closed) await Promise.all([first.close(), second.close()]);
    await database.drop();
    await simulator.close();
  });

  const payload = { model: 'gpt-4o-mini', max_tokens: 16_384, messages: [{ role: 'user', content: 'hello [sim:delay_ms=30]' }] };
  const chat = (api: TestApp, key: string) => api.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(key), payload });

  /** What one call reserves: read from the refusal of an account that cannot pay for it. */
  async function worstCaseMicros(): Promise<number> {
    const account = await createAccount(first.app, { name: 'probe', balance_usd: 0.000001 });
    const { key } = await createKey(first.app, account.id);
    const refused = await chat(first, key);
    assert.equal(refused.statusCode, 403, refused.body);
    const [, usd] = /may cost up to \$(\d+\.\d{6})/.exec(refused.json().error.message)!;
    return Math.round(Number(usd) * 1e6);
  }

  it('serves every call the balance can afford, from both processes, and the money adds up', async () => {
    const worst = await worstCaseMicros();
    const balances = [70_000, 150_000, 300_000, 500_000];
    const accountIds: string[] = [];
    const refusals: string[] = [];
    let slowestMs = 0;
    const owed = new Map<string, number>();
    for (const balanceMicros of balances) {
      assert.ok(CONCURRENCY * worst < balanceMicros, `six calls' worst cases (${CONCURRENCY * worst}) fit in ${balanceMicros}`);
      const account = await createAccount(first.app, { name: `shared-${balanceMicros}`, balance_usd: balanceMicros / 1e6 });
      const { key } = await createKey(first.app, account.id);
      accountIds.push(account.id);
      const nextProcess = processChoices(balanceMicros);
      let started = 0;
      let inFlight = 0;
      let spentMicros = 0;
      const worker = async () => {
        while (started < CALLS) {
          started++;
          // Affordable: the calls in flight reserve at most `worst` each, and with this one they
          // fit in the balance less what the calls answered so far spent (so until it answers).
          assert.ok((inFlight + 1) * worst <= balanceMicros - spentMicros, `the test's load must stay affordable: ${inFlight + 1} calls in flight, ${spentMicros} spent of ${balanceMicros}`);
          inFlight++;
          const sentAt = Date.now();
          const answer = await chat(nextProcess() === 0 ? first : second, key);
          slowestMs = Math.max(slowestMs, Date.now() - sentAt);
          inFlight--;
          if (answer.statusCode === 200) spentMicros += expectedChatMicros(answer.json().usage);
          else refusals.push(`$${balanceMicros / 1e6}: ${answer.statusCode} ${answer.json().error?.message}`);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, () => worker()));
      owed.set(account.id, spentMicros);
    }

    // Both processes settle their leases as they close: the ledger then holds nothing, and what
    // was spent is what the answers' usage costs, in the usage records too.
    closed = true;
    await Promise.all([first.close(), second.close()]);
    const accounts = new AccountStore(database.db);
    const usage = new UsageStore(database.db);
    for (const [index, accountId] of accountIds.entries()) {
      const account = (await accounts.find(accountId))!;
      const records = await usage.collection.find({ account_id: accountId }).toArray();
      const recorded = records.reduce((sum, record) => sum + record.spend_micros, 0);
      assert.equal(account.held_micros, 0);
      assert.equal(account.spent_micros, owed.get(accountId));
      assert.equal(recorded, account.spent_micros);
      assert.equal(account.balance_micros + account.spent_micros, balances[index]);
    }
    assert.deepEqual(refusals, [], `${refusals.length} of ${balances.length * CALLS} affordable calls refused`);
    // A caller waits for others' money at most 3 s (twice recallWaitMs): the calls take 30 ms.
    assert.ok(slowestMs < 3_000, `the slowest call took ${slowestMs} ms`);
  });
});
