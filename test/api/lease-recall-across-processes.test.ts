import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { buildSimulator } from '../../simulator/app.ts';
import { AccountStore } from '../../store/accounts.ts';
import { BudgetLeaseStore } from '../../store/budget-leases.ts';
import { Ledger } from '../../store/ledger.ts';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/engines.ts';
import { clearOfWindowEdge } from '../helpers/window-edge.ts';

// Two api processes on one store, through HTTP. A chat call on the first leaves the account's
// money leased there, idle; a video submission on the second that only that money can pay for
// is accepted, not refused with 403 (api/services/billing/lease-recall.ts); and so it is while a
// slow stream still runs on that lease (the lease hands back what the stream did not reserve).
// Money in the lease of a process that died is not a shortage: 503 with Retry-After until the
// lease expires, then the submission goes through. And an account's rate limit lowered through
// one process is applied by the other within about two seconds.

describe('money leased to another api process', () => {
  const simulator = buildSimulator();
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let first: TestApp;
  let second: TestApp;

  before(async () => {
    await simulator.listen({ host: '127.0.0.1', port: 0 });
    const simulatorUrl = `http://127.0.0.1:${(simulator.server.address() as AddressInfo).port}`;
    database = await testDatabase('recall_across');
    // Leases kept a minute after the last call, as a small one is in production (5 minutes).
    const settings = { SIMULATOR_URL: simulatorUrl, SPEND_LEASE_IDLE_MS: '60000', SPEND_LEASE_SMALL_IDLE_MS: '60000' };
    first = await startTestApp('recall_first', settings, { database });
    second = await startTestApp('recall_second', settings, { database });
  });
  after(async () => {
    await first.close();
    await second.close();
    await database.drop();
    await simulator.close();
  });

  /** The account once only `heldMicros` is held (the first process's lease has settled). */
  async function settledTo(accounts: AccountStore, accountId: string, heldMicros: number) {
    for (const deadline = Date.now() + 5_000; ; ) {
      const account = (await accounts.find(accountId))!;
      if (account.held_micros === heldMicros || Date.now() > deadline) return account;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  const submitVideo = (api: TestApp, key: string, seconds: string, resolution: string) =>
    api.app.inject({
      method: 'POST',
      url: '/v1/video/generations',
      headers: bearer(key),
      payload: { model: 'seedance-2.0', prompt: 'a lighthouse at dusk', seconds, metadata: { resolution } },
    });

  it('accepts a video submission that only the idle lease of the other process can pay for', async () => {
    // $1.05: a chat call leases $1 of it; the $0.40 video needs part of that lease.
    const account = await createAccount(first.app, { name: 'two-processes', balance_usd: 1.05 });
    const { key } = await createKey(first.app, account.id);
    const chat = await first.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: bearer(key),
      payload: { model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'hello' }] },
    });
    assert.equal(chat.statusCode, 200, chat.body);
    const accounts = new AccountStore(database.db);
    assert.equal((await accounts.find(account.id))!.held_micros, 1_000_000, 'the first process holds a $1 lease');

    const started = Date.now();
    // $0.40: 5 s at 720p.
    const video = await submitVideo(second, key, '5', '720p');
    assert.equal(video.statusCode, 200, video.body);
    assert.ok(Date.now() - started < 3_000, `accepted after ${Date.now() - started} ms`);

    const after = (await accounts.find(account.id))!;
    assert.equal(after.held_micros, 400_000, 'only the video hold is left; the lease went back');
    assert.ok(after.spent_micros > 0 && after.spent_micros < 1_000, `the chat call was paid: ${after.spent_micros}`);
    assert.equal(after.balance_micros, 1_050_000 - 400_000 - after.spent_micros);

    // No worker runs here, so the task keeps its hold: a refusal says that money is on its way
    // back rather than only "add credits".
    const refused = await submitVideo(first, key, '10', '1080p');
    assert.equal(refused.statusCode, 403, refused.body);
    assert.match(refused.json().error.message, /costs \$1\.600000 .* \(\$0\.400000 more is held for requests in progress/);
  });

  it("shares a small account between two processes' chat calls: once one asked the other back, neither leases the whole balance", async () => {
    // Below the $1 a lease holds at least, a balance went whole into one process's lease, and
    // the two processes kept taking it from each other: affordable calls got 403.
    const account = await createAccount(first.app, { name: 'shared-small', balance_usd: 0.2 });
    const { key } = await createKey(first.app, account.id);
    const chat = (api: TestApp) =>
      api.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(key), payload: { model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'hello' }] } });
    const accounts = new AccountStore(database.db);
    assert.equal((await chat(first)).statusCode, 200);
    assert.ok((await accounts.find(account.id))!.held_micros > 190_000, 'the first lease holds the whole balance');
    // The second process asks that lease back, and leases a quarter of the free balance.
    assert.equal((await chat(second)).statusCode, 200);
    const afterSecond = (await accounts.find(account.id))!;
    assert.ok(afterSecond.held_micros <= 60_000, `held after the second process's call: ${afterSecond.held_micros}`);
    // The first process, asked back once, does not take the rest again.
    await settledTo(accounts, account.id, afterSecond.held_micros);
    assert.equal((await chat(first)).statusCode, 200);
    const afterBoth = (await accounts.find(account.id))!;
    assert.ok(afterBoth.held_micros <= 110_000, `held with both processes' leases: ${afterBoth.held_micros}`);
    // Calls on both at once all pass: the free balance covers each process's next lease.
    const answers = await Promise.all(Array.from({ length: 16 }, (_, index) => chat(index % 2 === 0 ? first : second)));
    assert.deepEqual(answers.map((answer) => answer.statusCode), Array(16).fill(200));
  });

  it("applies an account's lowered rate limit in the other process within about two seconds", async () => {
    const account = await createAccount(first.app, { name: 'limit-lowered', balance_usd: 1 });
    const { key } = await createKey(first.app, account.id);
    const models = () => second.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    await clearOfWindowEdge(60_000, 15_000);
    // The second process has read the account's limits (the default).
    assert.equal((await models()).statusCode, 200);
    const lowered = await first.app.inject({ method: 'PUT', url: `/admin/accounts/${account.id}/rate-limits`, headers: adminHeaders, payload: { requests_per_minute: 1 } });
    assert.equal(lowered.statusCode, 200, lowered.body);
    const started = Date.now();
    while ((await models()).statusCode !== 429) {
      assert.ok(Date.now() - started < 3_500, 'the other process still serves under the old limit');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  it("applies an account's lowered rate limit in the other process to a burst that follows a pause", async () => {
    // The other process read the account's limits, then served nothing for a while: a burst
    // after the change must meet the new limit, not the one read before the pause.
    const account = await createAccount(first.app, { name: 'limit-after-pause', balance_usd: 1 });
    const { key } = await createKey(first.app, account.id);
    const models = () => second.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    await clearOfWindowEdge(60_000, 20_000);
    assert.equal((await models()).statusCode, 200);
    const lowered = await first.app.inject({ method: 'PUT', url: `/admin/accounts/${account.id}/rate-limits`, headers: adminHeaders, payload: { requests_per_minute: 3 } });
    assert.equal(lowered.statusCode, 200, lowered.body);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const burst = await Promise.all(Array.from({ length: 12 }, () => models()));
    const admitted = burst.filter((response) => response.statusCode === 200).length;
    // One call of the minute was made before the change: 2 more at most.
    assert.ok(admitted <= 2, `${admitted} of 12 admitted under the old limit (limit headers: ${[...new Set(burst.map((response) => response.headers['x-ratelimit-limit-requests']))]})`);
  });

  it('accepts it while a slow stream still runs on that lease, and the stream is paid when it ends', async () => {
    const account = await createAccount(first.app, { name: 'stream-elsewhere', balance_usd: 1.05 });
    const { key } = await createKey(first.app, account.id);
    let streamEnded = false;
    const stream = first.app
      .inject({
        method: 'POST',
        url: '/v1/chat/completions',
        headers: bearer(key),
        payload: { model: 'gpt-4o-mini', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'tell me a story [sim:slow]' }] },
      })
      .finally(() => (streamEnded = true));
    const accounts = new AccountStore(database.db);
    while ((await accounts.find(account.id))!.held_micros === 0) await new Promise((resolve) => setTimeout(resolve, 20));

    const started = Date.now();
    const video = await submitVideo(second, key, '5', '720p');
    assert.equal(video.statusCode, 200, video.body);
    assert.equal(streamEnded, false, `accepted after ${Date.now() - started} ms, before the stream ended`);

    const streamed = await stream;
    assert.equal(streamed.statusCode, 200);
    assert.match(streamed.body, /data: \[DONE\]/);
    const after = await settledTo(accounts, account.id, 400_000);
    assert.equal(after.held_micros, 400_000, 'only the video hold is left once the stream ended');
    assert.ok(after.spent_micros > 0 && after.spent_micros < 1_000, `the stream was paid: ${after.spent_micros}`);
    assert.equal(after.balance_micros, 1_050_000 - 400_000 - after.spent_micros);
  });

  it("answers 503 with Retry-After while a dead process's lease holds the money, and accepts the retry once it expired", async () => {
    const account = await createAccount(first.app, { name: 'dead-process', balance_usd: 1.05 });
    const { key } = await createKey(first.app, account.id);
    // What an api process that died leaves behind: its lease document and its hold, 3 s from expiry.
    const leases = new BudgetLeaseStore(database.db);
    const ledger = new Ledger(database.db);
    const reference = `lease_dead_${account.id}`;
    const expiresAt = new Date((await leases.clock.current()) + 3_000);
    await leases.open({ _id: reference, account_id: account.id, amount_micros: 1_000_000, opened_at: new Date(), expires_at: expiresAt });
    assert.equal(await ledger.apply({ accountId: account.id, keyId: null, reference, operation: 'hold', amountMicros: 1_000_000 }), 'applied');

    const refused = await submitVideo(second, key, '5', '720p');
    assert.equal(refused.statusCode, 503, refused.body);
    assert.match(refused.json().error.message, /\$0\.050000 available, but \$1\.000000 more is held by a gateway process that stopped responding/);
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 3, `Retry-After: ${refused.headers['retry-after']}`);

    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1_000));
    const accepted = await submitVideo(second, key, '5', '720p');
    assert.equal(accepted.statusCode, 200, accepted.body);
    assert.ok(await ledger.find(account.id, reference, 'release'), "the dead process's hold went back to the balance");
    const after = (await new AccountStore(database.db).find(account.id))!;
    assert.equal(after.held_micros, 400_000, 'only the video hold is left');
    assert.equal(after.balance_micros, 650_000);
  });
});
