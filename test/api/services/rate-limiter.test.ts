import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { GatewayError } from '../../../core/errors.ts';
import type { LimitStatus } from '../../../api/services/rate-limits/limit-answers.ts';
import { RateLimiter } from '../../../api/services/rate-limits/rate-limiter.ts';
import { accountOverrides } from '../../../store/rate-limit-overrides.ts';
import { RateLimitBlockStore } from '../../../store/rate-limit-blocks.ts';
import { testDatabase } from '../../helpers/engines.ts';
import { signal } from '../../helpers/signal.ts';
import { clearOfWindowEdge } from '../../helpers/window-edge.ts';
import { startTcpProxy } from '../../helpers/tcp-proxy.ts';
import { connectDatabase } from '../../../store/database.ts';

// What the rate limiter does in rounds on its own timer rather than inside a request: reading an
// account's overrides again while the account is in use (so an operator's change made through
// another process, or the store directly, arrives without any request waiting for the store),
// and claiming the next minute's first block for the keys in use before the minute changes.

const REFRESH_MS = 150;

describe('rate limiter: rounds on its own timer', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  const limiters: RateLimiter[] = [];
  before(async () => {
    database = await testDatabase('rate-limiter');
  });
  after(async () => {
    for (const limiter of limiters) limiter.close();
    await database.drop();
  });

  function limiter(): RateLimiter {
    const made = new RateLimiter({
      store: new RateLimitBlockStore(database.db),
      accountOverrides: accountOverrides(database.db),
      defaults: { requestsPerMinute: 1_000, tokensPerMinute: 100_000 },
      log: { warn() {} },
      accountLimitsRefreshMs: REFRESH_MS,
    });
    limiters.push(made);
    return made;
  }

  /** An account with its own requests-per-minute limit, a fresh limiter that has admitted one
   * call of it (so holds its overrides), and a way to change the limit behind its back. */
  async function accountInUse(name: string, requestsPerMinute: number) {
    const accounts = accountOverrides(database.db);
    await accounts.insertOne({ _id: `acct_${name}`, rate_limits: { requests_per_minute: requestsPerMinute } });
    const limits = limiter();
    const caller = { accountId: `acct_${name}`, keyId: `key_${name}` };
    assert.equal((await limits.admitRequest(caller)).limit, requestsPerMinute);
    const changeLimit = (to: number) => accounts.updateOne({ _id: `acct_${name}` }, { $set: { rate_limits: { requests_per_minute: to } } });
    return { limits, caller, changeLimit };
  }

  it('answers from memory meanwhile and shows a change made behind its back within two rounds', async () => {
    // Within one minute: a new minute's first admission may claim a block (a promise) under the
    // old limit, which the loop below would take for the new limit's (a clean-clone run met it).
    await clearOfWindowEdge(60_000, 5_000);
    const { limits, caller, changeLimit } = await accountInUse('rounds', 50_000);

    await changeLimit(70_000);
    const started = Date.now();
    let status: LimitStatus | Promise<LimitStatus> = limits.admitRequest(caller);
    // Blocks are a tenth of the limit, so under the old limit every admission is answered from
    // memory: no promise, nobody waiting for the store.
    while (!(status instanceof Promise) && status.limit === 50_000) {
      assert.ok(Date.now() - started < 5_000, 'the new limit never arrived');
      await pause(10);
      status = limits.admitRequest(caller);
    }
    // The first admission under the new limit claims that limit's first block: a promise.
    assert.equal((await status).limit, 70_000);
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 2 * REFRESH_MS + 1_000, `the new limit arrived after ${elapsed} ms`);
  });

  it('does not read an account nobody calls for', async () => {
    const minuteOf = (time: number) => Math.floor(time / 60_000);
    const startedIn = minuteOf(Date.now());
    const { limits, caller, changeLimit } = await accountInUse('idle', 30);
    await changeLimit(40);
    // Several rounds without a call: the account was not due, so the old limit still answers
    // (the first call after the pause only makes it due).
    await pause(4 * REFRESH_MS);
    const status = limits.admitRequest(caller);
    // From memory, unless a new UTC minute began meanwhile (a slow store can stretch the test
    // over one): its first block is claimed from the store, which reads no account either.
    if (minuteOf(Date.now()) === startedIn) assert.ok(!(status instanceof Promise), 'answered from memory');
    assert.equal((await status).limit, 30);
  });

  it('counts tokens in the minute they are spent in, whichever minute admitted the call', async () => {
    const limits = limiter();
    const caller = { accountId: 'acct_late', keyId: 'key_late', rateLimits: { tokens_per_minute: 1_000 } };
    const minute = Math.floor(Date.now() / 60_000) + 20;
    const at = (offsetMs: number) => minute * 60_000 + offsetMs;
    // A stream admitted in the last tenth of a second of its minute, ending in the next: counted
    // 100 tokens there, it used 600, so the next minute counts 500.
    const admitted = await limits.admitTokens(caller, 100, at(59_900));
    assert.equal(admitted.status.remaining, 900);
    limits.settleTokens(caller, admitted, 600, at(60_400));
    await pause(100);
    assert.equal((await limits.admitTokens(caller, 0, at(60_500))).status.remaining, 500);
  });

  it('counts what an admitted call expects, so calls made together are held to the limit, and corrects it to their use', async () => {
    const limits = limiter();
    const caller = { accountId: 'acct_burst', keyId: 'key_burst', rateLimits: { tokens_per_minute: 1_000 } };
    const minute = Math.floor(Date.now() / 60_000) + 25;
    const at = (offsetMs: number) => minute * 60_000 + offsetMs;
    // 30 calls at once, each expecting 150 tokens, on a minute nobody used yet (so all wait for
    // the first block): 7 fit (the seventh overshooting), the rest are refused.
    const outcomes = await Promise.allSettled(Array.from({ length: 30 }, () => limits.admitTokens(caller, 150, at(1_000))));
    const admitted = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    assert.equal(admitted.length, 7);
    for (const outcome of outcomes) if (outcome.status === 'rejected') assert.match(String(outcome.reason), /1000 tokens per minute/);
    // They used 20 tokens each: the rest comes back for later calls.
    for (const call of admitted) limits.settleTokens(caller, call, 20, at(2_000));
    const next = await limits.admitTokens(caller, 0, at(3_000));
    assert.equal(next.status.remaining, 1_000 - 7 * 20);
  });

  it('refuses a call expecting more tokens than the whole minute, whether or not the minute was claimed yet, and counts nothing for it', async () => {
    const limits = limiter();
    const caller = { accountId: 'acct_large', keyId: 'key_large', rateLimits: { tokens_per_minute: 1_000 } };
    const minute = Math.floor(Date.now() / 60_000) + 30;
    const at = (offsetMs: number) => minute * 60_000 + offsetMs;
    const tooLarge = (error: unknown) => {
      assert.ok(error instanceof GatewayError, String(error));
      const refusal = error;
      assert.equal(refusal.code, 'rate_limit_exceeded');
      assert.equal(refusal.headers['x-should-retry'], 'false');
      assert.equal(refusal.headers['retry-after'], undefined);
      assert.match(refusal.message, /at least about 1001 tokens, and this key may use (1000|100000) tokens per minute/);
      return true;
    };
    // First on a fresh minute (no units at hand: the claim path), then from memory.
    await assert.rejects(async () => limits.admitTokens(caller, 1_001, at(1_000)), tooLarge);
    assert.equal((await limits.admitTokens(caller, 0, at(2_000))).status.remaining, 1_000);
    assert.throws(() => limits.admitTokens(caller, 1_001, at(3_000)), tooLarge);
    const whole = await limits.admitTokens(caller, 1_000, at(4_000));
    assert.equal(whole.status.remaining, 0);
    // Its limit not known yet (no limit of the key's own, the account's overrides unread): the
    // check runs once the allowance is read.
    const unread = { accountId: 'acct_large_unread', keyId: 'key_large_unread' };
    await assert.rejects(async () => limits.admitTokens(unread, 100_001, at(5_000), 100_001), (error: unknown) => {
      assert.ok(error instanceof GatewayError, String(error));
      assert.match(error.message, /at least about 100001 tokens, and this key may use 100000 tokens per minute/);
      return true;
    });
    // Refused by the least the prompt can cost, not the most: a worst case over the minute
    // whose least fits is admitted (and counted at its worst, corrected at the end).
    const fits = await limits.admitTokens(caller, 5_000, at(61_000), 900);
    assert.equal(fits.tokens, 5_000);
  });

  it('lets a chat call through uncounted while the store cannot be reached, so its settlement gives nothing back', async () => {
    const warnings: string[] = [];
    const broken = new RateLimiter({
      store: { claim: () => Promise.reject(new Error('store unreachable')) } as unknown as RateLimitBlockStore,
      accountOverrides: accountOverrides(database.db),
      defaults: { requestsPerMinute: 1_000, tokensPerMinute: 100_000 },
      log: { warn: (...args: unknown[]) => void warnings.push(String(args[1])) },
    });
    limiters.push(broken);
    const caller = { accountId: 'acct_blind', keyId: 'key_blind', rateLimits: { tokens_per_minute: 1_000 } };
    const admitted = await broken.admitTokens(caller, 150);
    assert.equal(admitted.tokens, 0);
    assert.deepEqual(warnings, ['rate limit store unreachable; let through']);
  });

  it('settles a call let through on a claim still out only once the claim lands: a failed one gives back nothing it never took', async () => {
    const warnings: string[] = [];
    const slowThenBroken = new RateLimiter({
      store: { claim: () => pause(200).then(() => Promise.reject(new Error('store unreachable'))) } as unknown as RateLimitBlockStore,
      accountOverrides: accountOverrides(database.db),
      defaults: { requestsPerMinute: 1_000, tokensPerMinute: 100_000 },
      log: { warn: (...args: unknown[]) => void warnings.push(String(args[1])) },
      claimWaitMs: 50,
    });
    limiters.push(slowThenBroken);
    const caller = { accountId: 'acct_late', keyId: 'key_late', rateLimits: { tokens_per_minute: 1_000 } };
    const admitted = await slowThenBroken.admitTokens(caller, 100);
    // The call used less than it was counted for, and ends before the claim fails.
    slowThenBroken.settleTokens(caller, admitted, 20);
    await pause(400);
    assert.equal(admitted.tokens, 0, 'the failed claim counted nothing');
    // Giving back 80 tokens counted by a claim that never landed would have left them at hand,
    // handed out with no block behind them: the next call must claim again.
    assert.ok(slowThenBroken.admitTokens(caller, 10) instanceof Promise, 'tokens at hand that no block gave');
    assert.deepEqual(warnings.slice(0, 2), ['rate limit store slow to answer; let through', 'rate limit store unreachable; a call let through was not counted']);
  });

  it('keeps counting a minute whose limit changed: a lowered limit is not a fresh allowance, a raised one adds only the difference', async () => {
    const limits = limiter();
    const minute = Math.floor(Date.now() / 60_000) + 30;
    /** How many of `calls` requests of the key, `from` ms into the key's minute (at most 100 a
     * ms), are admitted under `requestsPerMinute`. Each key has a minute of its own. */
    const admittedFor = (keyId: string, ofMinute: number) => async (requestsPerMinute: number, calls: number, from: number) => {
      const caller = { accountId: 'acct_change', keyId, rateLimits: { requests_per_minute: requestsPerMinute } };
      let count = 0;
      for (let call = 0; call < calls; call++) {
        try {
          await limits.admitRequest(caller, ofMinute * 60_000 + from + call / 100);
          count++;
        } catch {
          // 429: over the limit.
        }
      }
      return count;
    };
    const admitted = admittedFor('key_change', minute);
    assert.equal(await admitted(10, 8, 1_000), 8);
    assert.equal(await admitted(4, 5, 2_000), 0, 'lowered to 4 after 8 calls: none more this minute');
    const next = admittedFor('key_raise', minute + 1);
    assert.equal(await next(3, 5, 1_000), 3);
    assert.equal(await next(10, 12, 2_000), 7, 'raised from 3 to 10 after 3 calls: 7 more');
    // Blocks of more than one unit: the new limit's first block was partly used, not all of it.
    const third = admittedFor('key_raise_far', minute + 2);
    assert.equal(await third(2, 2, 1_000), 2);
    assert.equal(await third(1_000, 1_000, 2_000), 998, 'raised from 2 to 1,000 after 2 calls: 998 more');
    // And back again: the earlier limit's blocks that the use since filled are gone, and the one
    // it ends in is that much spent (blocks of 10; 45 used).
    const fourth = admittedFor('key_back_partly', minute + 3);
    assert.equal(await fourth(100, 5, 1_000), 5);
    assert.equal(await fourth(1_000, 40, 2_000), 40);
    assert.equal(await fourth(100, 100, 3_000), 55, 'back to 100 after 45 calls: 55 more');
  });

  it('keeps counting when a limit goes back to one whose block claim was still out', async () => {
    const minute = Math.floor(Date.now() / 60_000) + 50;
    // The first limit's claim of its fourth block (a block a call, claimed ahead once the third
    // call took the third) waits at a gate while the key runs under the second limit.
    const gate = signal();
    const heldClaim = `requests:key_gated:${minute}:10:3`;
    class GatedBlocks extends RateLimitBlockStore {
      override async claim(id: string, expiresAt: Date): Promise<boolean> {
        if (id === heldClaim) await gate.reached;
        return super.claim(id, expiresAt);
      }
    }
    const limits = new RateLimiter({ store: new GatedBlocks(database.db), accountOverrides: accountOverrides(database.db), defaults: { requestsPerMinute: 1_000, tokensPerMinute: 100_000 }, log: { warn() {} } });
    limiters.push(limits);
    const caller = (limit: number) => ({ accountId: 'acct_gated', keyId: 'key_gated', rateLimits: { requests_per_minute: limit } });
    const admitted = async (limit: number, calls: number, from: number) => {
      let count = 0;
      for (let call = 0; call < calls; call++) {
        try {
          await limits.admitRequest(caller(limit), minute * 60_000 + from + call);
          count++;
        } catch {
          // 429: over the limit.
        }
      }
      return count;
    };
    try {
      assert.equal(await admitted(10, 3, 1_000), 3);
      assert.equal(await admitted(20, 10, 2_000), 10);
      const back = admitted(10, 10, 3_000);
      await pause(50);
      gate.fire();
      assert.equal(await back, 0, 'back to 10 after 13 calls: none more this minute');
    } finally {
      gate.fire();
    }
  });

  it('keeps counting when a limit goes back to one it had earlier in the minute', async () => {
    const limits = limiter();
    const minute = Math.floor(Date.now() / 60_000) + 40;
    const admitted = async (kind: 'requests' | 'tokens', limit: number, calls: number, from: number) => {
      const field = kind === 'requests' ? 'requests_per_minute' : 'tokens_per_minute';
      const caller = { accountId: 'acct_back', keyId: `key_back_${kind}`, rateLimits: { [field]: limit } };
      let count = 0;
      for (let call = 0; call < calls; call++) {
        const at = minute * 60_000 + from + call;
        try {
          if (kind === 'requests') await limits.admitRequest(caller, at);
          else await limits.admitTokens(caller, 10, at);
          count++;
        } catch {
          // 429: over the limit.
        }
      }
      return count;
    };
    assert.equal(await admitted('requests', 10, 2, 1_000), 2);
    assert.equal(await admitted('requests', 20, 10, 2_000), 10);
    assert.equal(await admitted('requests', 10, 10, 3_000), 0, 'back to 10 after 12 calls: none more this minute');
    assert.equal(await admitted('tokens', 100, 2, 1_000), 2);
    assert.equal(await admitted('tokens', 1_000, 20, 2_000), 20);
    assert.equal(await admitted('tokens', 100, 5, 3_000), 0, 'back to 100 tokens after 220: none more this minute');
  });

  it('lets a call through after CLAIM_WAIT_MS when its block claim meets a hung store, where it waited for the driver to give up', async () => {
    const target = new URL(process.env.FRAMEGATE_TEST_MONGODB_URI!);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const behindProxy = await connectDatabase(`mongodb://127.0.0.1:${proxy.port}/`, database.db.databaseName);
    // The account reads asked of the driver are counted below (a stalled store never sees them).
    const overrides = accountOverrides(behindProxy.db);
    const findOne = overrides.findOne.bind(overrides);
    let accountReads = 0;
    overrides.findOne = ((...args: Parameters<typeof findOne>) => {
      accountReads++;
      return findOne(...args);
    }) as typeof overrides.findOne;
    const warnings: string[] = [];
    const limits = new RateLimiter({
      store: new RateLimitBlockStore(behindProxy.db),
      accountOverrides: overrides,
      defaults: { requestsPerMinute: 1_000, tokensPerMinute: 100_000 },
      log: { warn: (...args: unknown[]) => void warnings.push(String(args[1])) },
      claimWaitMs: 300,
    });
    limiters.push(limits);
    try {
      // Key limits, so no account read is involved; a minute of their own, ahead of the clock.
      const caller = (keyId: string) => ({ accountId: 'acct_hung', keyId, rateLimits: { requests_per_minute: 100, tokens_per_minute: 10_000 } });
      const at = (Math.floor(Date.now() / 60_000) + 20) * 60_000 + 1_000;
      assert.equal((await limits.admitRequest(caller('key_before'), at)).remaining, 99, 'the store answers before the stall');
      proxy.stall();
      for (const admit of [() => limits.admitRequest(caller('key_requests'), at), () => limits.admitTokens(caller('key_tokens'), 100, at)]) {
        const started = performance.now();
        await admit();
        const waitedMs = performance.now() - started;
        assert.ok(waitedMs >= 290 && waitedMs < 1_500, `let through after ${Math.round(waitedMs)} ms`);
      }
      assert.deepEqual(warnings, ['rate limit store slow to answer; let through', 'rate limit store slow to answer; let through']);
      // Keys without limits of their own, of an account whose overrides were never read: the
      // read waits as long, then the defaults apply (and the claim waits as long again). Calls
      // waiting at once share the one read.
      const started = performance.now();
      const unread = await Promise.all(['key_unread_1', 'key_unread_2'].map((keyId) => limits.admitRequest({ accountId: 'acct_unread', keyId }, at)));
      assert.deepEqual(unread.map((status) => status.limit), [1_000, 1_000]);
      const waitedMs = performance.now() - started;
      assert.ok(waitedMs >= 580 && waitedMs < 2_000, `let through after ${Math.round(waitedMs)} ms`);
      assert.equal(accountReads, 1, `one read of the account for both calls: ${accountReads}`);
      assert.ok(warnings.includes('rate limit store slow to answer; the default limits apply meanwhile'));
    } finally {
      await proxy.restore();
      await behindProxy.close();
      await proxy.close();
    }
  });

  it("claims the next minute's first block ahead for the keys in use, so its first call waits for nothing", async () => {
    const limits = limiter();
    const without = limiter();
    // Key limits, so no account read is involved; a minute of their own, ahead of the clock.
    const caller = (keyId: string) => ({ accountId: 'acct_next', keyId, rateLimits: { requests_per_minute: 100 } });
    const minute = Math.floor(Date.now() / 60_000) + 10;
    const at = (offsetMs: number) => minute * 60_000 + offsetMs;
    assert.equal((await limits.admitRequest(caller('key_busy'), at(1_000))).remaining, 99);
    assert.equal((await limits.admitRequest(caller('key_quiet'), at(2_000))).remaining, 99);
    assert.equal((await without.admitRequest(caller('key_control'), at(1_000))).remaining, 99);

    await limits.claimNextMinute(at(57_000));
    const first = limits.admitRequest(caller('key_busy'), at(60_001));
    assert.ok(!(first instanceof Promise), "the next minute's first call waited for a block claim");
    assert.equal(first.remaining, 99);
    // The control, with no round before the minute changed, claims its block in line.
    const control = without.admitRequest(caller('key_control'), at(60_001));
    assert.ok(control instanceof Promise);
    assert.equal((await control).remaining, 99);

    // A block claimed ahead for a key that then went quiet leads to no further claims.
    await limits.claimNextMinute(at(117_000));
    const blocks = new RateLimitBlockStore(database.db).collection;
    assert.equal(await blocks.countDocuments({ _id: `requests:key_busy:${minute + 2}:100:0` }), 1);
    assert.equal(await blocks.countDocuments({ _id: `requests:key_quiet:${minute + 1}:100:0` }), 1);
    assert.equal(await blocks.countDocuments({ _id: `requests:key_quiet:${minute + 2}:100:0` }), 0);
  });
});
