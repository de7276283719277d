import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountStore } from '../../store/accounts.ts';
import { ApiKeyStore } from '../../store/api-keys.ts';
import { moveLegacyOverrides } from '../../store/rate-limit-overrides.ts';
import { RateLimitSettings } from '../../api/services/rate-limits/limit-settings.ts';
import type { RateLimiter } from '../../api/services/rate-limits/rate-limiter.ts';
import { testDatabase } from '../helpers/engines.ts';

// FerretDB applies an update as a read-modify-write of the whole document without isolation:
// two writes to one document at once can each land the document the other read. Rate limits
// therefore live in documents of their own, and these races must lose nothing, on FerretDB as
// on MongoDB.

const TRIALS = 40;

describe('rate-limit overrides in their own documents', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('rate-limit-overrides');
  });
  after(() => database.drop());

  it('keeps both a key revocation and limits set on the key at the same moment', async () => {
    const admin = new ApiKeyStore(database.db);
    const operator = new ApiKeyStore(database.client.db(database.db.databaseName));
    for (let trial = 0; trial < TRIALS; trial++) {
      const { key, plaintext } = await admin.create({ accountId: 'acct_keys', name: `k${trial}`, models: null });
      const limits = { requests_per_minute: 100 + trial, tokens_per_minute: null };
      await Promise.all([admin.revoke(key._id), operator.setRateLimits(key._id, limits)]);
      assert.ok((await admin.collection.findOne({ _id: key._id }))?.revoked_at, `trial ${trial}: the revocation was undone`);
      const fresh = new ApiKeyStore(database.client.db(database.db.databaseName));
      assert.equal(await fresh.findActiveByPlaintext(plaintext), null, `trial ${trial}: a fresh process accepts the revoked key`);
      fresh.stopWatching();
      const listed = (await admin.listForAccount('acct_keys')).find((candidate) => candidate._id === key._id);
      assert.deepEqual(listed?.rate_limits, limits, `trial ${trial}: the limits were lost`);
    }
    admin.stopWatching();
    operator.stopWatching();
  });

  it("tells the operator a key revoked while its limits were set apart from one revoked before", async () => {
    // The revocation lands between the settings' look at the key and their write.
    class RevokedDuringTheWrite extends ApiKeyStore {
      override async setRateLimits(...args: Parameters<ApiKeyStore['setRateLimits']>) {
        await this.revoke(args[0]);
        return super.setRateLimits(...args);
      }
    }
    const keys = new RevokedDuringTheWrite(database.db);
    const settings = new RateLimitSettings({ accounts: new AccountStore(database.db), apiKeys: keys, limiter: {} as RateLimiter });
    const { key } = await keys.create({ accountId: 'acct_meanwhile', name: 'going', models: null });
    const limits = { requests_per_minute: 7, tokens_per_minute: null };
    assert.equal(await settings.setForKey(key._id, limits), 'revoked-meanwhile');
    assert.equal(await settings.setForKey(key._id, limits), 'revoked');
    assert.equal(await settings.setForKey('key_missing', limits), 'missing');
    keys.stopWatching();
  });

  it('keeps both a webhook secret rotation and limits set on the account at the same moment', async () => {
    const accounts = new AccountStore(database.db);
    for (let trial = 0; trial < TRIALS; trial++) {
      const account = await accounts.create({ name: `a${trial}`, balanceMicros: 0 });
      const limits = { requests_per_minute: null, tokens_per_minute: 1_000 + trial };
      await Promise.all([accounts.rotateWebhookSecret(account._id, 60), accounts.setRateLimits(account._id, limits)]);
      const after = await accounts.findWithLimits(account._id);
      assert.equal(after?.previous_webhook_secrets?.[0]?.secret, account.webhook_secret, `trial ${trial}: the rotation was undone`);
      assert.notEqual(after?.webhook_secret, account.webhook_secret, `trial ${trial}: the old secret is current again`);
      assert.deepEqual(after?.rate_limits, limits, `trial ${trial}: the limits were lost`);
    }
  });

  it('takes two first settings of one account at once (FerretDB refuses the second insert of an upsert)', async () => {
    const accounts = new AccountStore(database.db);
    for (let trial = 0; trial < TRIALS; trial++) {
      const account = await accounts.create({ name: `first${trial}`, balanceMicros: 0 });
      const settings = [{ requests_per_minute: 1 }, { requests_per_minute: 2 }];
      const results = await Promise.allSettled(settings.map((limits) => accounts.setRateLimits(account._id, limits)));
      assert.deepEqual(results.map((result) => result.status), ['fulfilled', 'fulfilled'], `trial ${trial}: ${results.map((result) => (result.status === 'rejected' ? String(result.reason) : 'ok'))}`);
      assert.ok([1, 2].includes((await accounts.findWithLimits(account._id))!.rate_limits!.requests_per_minute!), `trial ${trial}`);
    }
  });

  it('refuses limits for an account or key that does not exist, and writes none', async () => {
    assert.equal(await new AccountStore(database.db).setRateLimits('acct_missing', { requests_per_minute: 5 }), false);
    assert.equal(await new ApiKeyStore(database.db).setRateLimits('key_missing', { requests_per_minute: 5 }), null);
    assert.equal(await database.db.collection('account_rate_limits').countDocuments({ _id: 'acct_missing' as never }), 0);
    assert.equal(await database.db.collection('api_key_rate_limits').countDocuments({ _id: 'key_missing' as never }), 0);
  });

  it('moves limits a store from before the move kept on account and key documents, once, never over newer ones', async () => {
    const db = database.client.db(`${database.db.databaseName}_legacy`);
    try {
      await db.collection('accounts').insertMany([
        { _id: 'acct_old' as never, name: 'old', webhook_secret: 'whsec_x', created_at: new Date(), rate_limits: { requests_per_minute: 7 } },
        { _id: 'acct_plain' as never, name: 'plain', webhook_secret: 'whsec_y', created_at: new Date() },
      ]);
      await db.collection('api_keys').insertOne({ _id: 'key_old' as never, account_id: 'acct_old', rate_limits: { tokens_per_minute: 9 } });
      // Set after the upgrade, before the move ran: the newer setting stands.
      await db.collection('api_key_rate_limits').insertOne({ _id: 'key_old' as never, rate_limits: { tokens_per_minute: 11 } });

      await moveLegacyOverrides(db);
      assert.deepEqual(await db.collection('account_rate_limits').find().toArray(), [{ _id: 'acct_old', rate_limits: { requests_per_minute: 7 } }]);
      assert.deepEqual((await db.collection('api_key_rate_limits').findOne({ _id: 'key_old' as never }))?.rate_limits, { tokens_per_minute: 11 });

      // Once per store: an override set afterwards is not copied over again.
      await db.collection('account_rate_limits').updateOne({ _id: 'acct_old' as never }, { $set: { rate_limits: null } });
      await moveLegacyOverrides(db);
      assert.equal((await db.collection('account_rate_limits').findOne({ _id: 'acct_old' as never }))?.rate_limits, null);
    } finally {
      await db.dropDatabase();
    }
  });
});
