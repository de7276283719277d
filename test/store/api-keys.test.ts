import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiKeyStore, KEY_CACHE_MS, KEY_REFRESH_AFTER_MS } from '../../store/api-keys.ts';
import { testDatabase } from '../helpers/engines.ts';

// Authentication reads keys through a short cache. A revocation must reach the process that
// made it at once, through any store over the same database, and every other process within
// KEY_CACHE_MS (here: a store over a second connection, as another API instance has).

describe('API key lookups', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('api-keys');
  });
  after(() => database.drop());

  it('refuses a revoked key at once in this process, and within the cache time elsewhere', async () => {
    const admin = new ApiKeyStore(database.db);
    const auth = new ApiKeyStore(database.db);
    const otherInstance = new ApiKeyStore(database.client.db(database.db.databaseName));
    const { key, plaintext } = await admin.create({ accountId: 'acct_x', name: 'k', models: null });

    assert.equal((await auth.findActiveByPlaintext(plaintext))?._id, key._id);
    const cachedAt = Date.now();
    assert.equal((await otherInstance.findActiveByPlaintext(plaintext, cachedAt))?._id, key._id);
    await admin.revoke(key._id);

    assert.equal(await auth.findActiveByPlaintext(plaintext), null, 'the revoking process refuses at once');
    assert.equal(await admin.findActiveByPlaintext(plaintext), null);
    // Another instance still trusts its cached read, but only until the cache time has passed.
    assert.ok(await otherInstance.findActiveByPlaintext(plaintext, cachedAt + KEY_CACHE_MS - 1));
    assert.equal(await otherInstance.findActiveByPlaintext(plaintext, cachedAt + KEY_CACHE_MS + 1), null);
  });

  it('reads a key in use again in the background, answering from the cache meanwhile', async () => {
    const admin = new ApiKeyStore(database.db);
    const otherInstance = new ApiKeyStore(database.client.db(database.db.databaseName));
    const { key, plaintext } = await admin.create({ accountId: 'acct_r', name: 'k', models: null });
    const cachedAt = Date.now();
    assert.equal((await otherInstance.findActiveByPlaintext(plaintext, cachedAt))?._id, key._id);
    await admin.revoke(key._id);

    // Past the refresh point the cached key still answers (nobody waits for the store) and a
    // read starts behind it; once that read is back, the revocation shows before KEY_CACHE_MS.
    const refreshAt = cachedAt + KEY_REFRESH_AFTER_MS;
    assert.ok(await otherInstance.findActiveByPlaintext(plaintext, refreshAt), 'answered from the cache');
    const deadline = Date.now() + 5_000;
    let found = await otherInstance.findActiveByPlaintext(plaintext, refreshAt + 1);
    while (found && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      found = await otherInstance.findActiveByPlaintext(plaintext, refreshAt + 1);
    }
    assert.equal(found, null, 'the background read saw the revocation');
    assert.ok(refreshAt + 1 < cachedAt + KEY_CACHE_MS);
  });

  it('finds nothing for an unknown key and does not cache the miss', async () => {
    const store = new ApiKeyStore(database.db);
    const created = await store.create({ accountId: 'acct_y', name: 'k', models: null });
    await store.collection.deleteOne({ _id: created.key._id });
    assert.equal(await store.findActiveByPlaintext(created.plaintext, 0), null);
    await store.collection.insertOne(created.key);
    assert.equal((await store.findActiveByPlaintext(created.plaintext, 1))?._id, created.key._id);
  });
});
