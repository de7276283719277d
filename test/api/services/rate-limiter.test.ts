import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { RateLimiter, type AccountRateLimits, type LimitStatus } from '../../../api/services/rate-limits/rate-limiter.ts';
import { RateLimitBlockStore } from '../../../store/rate-limit-blocks.ts';
import { testDatabase } from '../../helpers/engines.ts';

// An account's rate-limit overrides as another API process sees them: read once, answered from
// memory, and read again in background rounds while the account is in use, so an operator's
// change made through another process (or the store directly) arrives without any request
// waiting for the store.

const REFRESH_MS = 150;

describe('rate limiter: account overrides read again in rounds', () => {
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
      accounts: database.db.collection<AccountRateLimits>('accounts'),
      defaults: { requestsPerMinute: 1_000, tokensPerMinute: 100_000 },
      log: { warn() {} },
      accountLimitsRefreshMs: REFRESH_MS,
    });
    limiters.push(made);
    return made;
  }

  it('answers from memory meanwhile and shows a change made behind its back within two rounds', async () => {
    const accounts = database.db.collection<AccountRateLimits>('accounts');
    await accounts.insertOne({ _id: 'acct_rounds', rate_limits: { requests_per_minute: 50_000 } });
    const limits = limiter();
    const caller = { accountId: 'acct_rounds', keyId: 'key_rounds' };
    assert.equal((await limits.admitRequest(caller)).limit, 50_000);

    await accounts.updateOne({ _id: 'acct_rounds' }, { $set: { rate_limits: { requests_per_minute: 70_000 } } });
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
    const accounts = database.db.collection<AccountRateLimits>('accounts');
    await accounts.insertOne({ _id: 'acct_idle', rate_limits: { requests_per_minute: 30 } });
    const limits = limiter();
    const caller = { accountId: 'acct_idle', keyId: 'key_idle' };
    assert.equal((await limits.admitRequest(caller)).limit, 30);
    await accounts.updateOne({ _id: 'acct_idle' }, { $set: { rate_limits: { requests_per_minute: 40 } } });
    // Several rounds without a call: the account was not due, so the old limit still answers
    // (the first call after the pause only makes it due).
    await pause(4 * REFRESH_MS);
    const status = limits.admitRequest(caller);
    assert.ok(!(status instanceof Promise));
    assert.equal(status.limit, 30);
  });
});
