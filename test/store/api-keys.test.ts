import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiKeyStore, KEY_CACHE_MS, KEY_REFRESH_AFTER_MS } from '../../store/api-keys.ts';
import { testDatabase } from '../helpers/engines.ts';

// Authentication reads keys through a cache. A revocation must reach the process that made it
// at once, through any store over the same database, and every other process within
// KEY_CACHE_MS (here: a store over a second Db handle, as another API instance has its own),
// through the change feed while it is live, or because reads age out when it is not.

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('API key lookups', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('api-keys');
  });
  after(() => database.drop());

  function otherInstance(): ApiKeyStore {
    return new ApiKeyStore(database.client.db(database.db.databaseName));
  }

  /** Milliseconds until `store` refuses the key (fails after 5 s). */
  async function refusedAfter(store: ApiKeyStore, plaintext: string): Promise<number> {
    const started = Date.now();
    while (await store.findActiveByPlaintext(plaintext)) {
      assert.ok(Date.now() - started < 5_000, 'still accepted after 5 s');
      await pause(10);
    }
    return Date.now() - started;
  }

  it('refuses a revoked key at once in this process, and within the cache time elsewhere', async () => {
    const admin = new ApiKeyStore(database.db);
    const auth = new ApiKeyStore(database.db);
    const other = otherInstance();
    const { key, plaintext } = await admin.create({ accountId: 'acct_x', name: 'k', models: null });
    assert.equal((await auth.findActiveByPlaintext(plaintext))?._id, key._id);
    assert.equal((await other.findActiveByPlaintext(plaintext))?._id, key._id);
    // Idle past KEY_CACHE_MS: only the change feed vouches for the other instance's read now.
    await pause(KEY_CACHE_MS + 200);
    assert.ok(await other.findActiveByPlaintext(plaintext));

    await admin.revoke(key._id);
    assert.equal(await auth.findActiveByPlaintext(plaintext), null, 'the revoking process refuses at once');
    assert.equal(await admin.findActiveByPlaintext(plaintext), null);
    const elapsed = await refusedAfter(other, plaintext);
    assert.ok(elapsed < KEY_CACHE_MS, `another instance refused the key after ${elapsed} ms`);
    other.stopWatching();
  });

  it('answers an idle key from memory while the change feed is live, and reads it again when the feed is not', async () => {
    const admin = new ApiKeyStore(database.db);
    const live = otherInstance();
    const stalled = otherInstance();
    const { key, plaintext } = await admin.create({ accountId: 'acct_i', name: 'k', models: null });
    assert.ok(await live.findActiveByPlaintext(plaintext));
    assert.ok(await stalled.findActiveByPlaintext(plaintext));
    stalled.stopWatching();
    await pause(KEY_CACHE_MS + 200);
    // Changed behind every feed's back: whoever reads the store sees the key gone.
    await admin.collection.deleteOne({ _id: key._id });
    assert.equal((await live.findActiveByPlaintext(plaintext))?._id, key._id, 'no read in line: the feed vouched for the cached key');
    assert.equal(await stalled.findActiveByPlaintext(plaintext), null, 'without a live feed the read aged out after KEY_CACHE_MS');
    // The call the cache answered started a background read, which the next calls see.
    assert.ok((await refusedAfter(live, plaintext)) < 1_000);
    live.stopWatching();
  });

  it('reports each change once: after reading the changed key again, another instance keeps it in memory', async () => {
    const admin = new ApiKeyStore(database.db);
    const other = otherInstance();
    const { key, plaintext } = await admin.create({ accountId: 'acct_o', name: 'k', models: null });
    assert.ok(await other.findActiveByPlaintext(plaintext));
    await admin.setRateLimits(key._id, { requests_per_minute: 7 });
    const deadline = Date.now() + 5_000;
    while ((await other.findActiveByPlaintext(plaintext))?.rate_limits?.requests_per_minute !== 7) {
      assert.ok(Date.now() < deadline, 'the new limits never reached the other instance');
      await pause(10);
    }
    // Gone behind the feed's back: only a read in line would notice. Several polls later, still
    // within the 5 s the change's record stays visible, the change must not drop the read again.
    await admin.collection.deleteOne({ _id: key._id });
    await pause(KEY_REFRESH_AFTER_MS + 300);
    assert.equal((await other.findActiveByPlaintext(plaintext))?._id, key._id, 'answered from memory');
    other.stopWatching();
  });

  it('keeps the change feed polling while another store over the same database still watches it', async () => {
    const admin = new ApiKeyStore(database.db);
    const db = database.client.db(database.db.databaseName);
    const closing = new ApiKeyStore(db);
    const staying = new ApiKeyStore(db);
    const { key, plaintext } = await admin.create({ accountId: 'acct_w', name: 'k', models: null });
    assert.ok(await closing.findActiveByPlaintext(plaintext));
    assert.ok(await staying.findActiveByPlaintext(plaintext));
    closing.stopWatching();
    await pause(KEY_CACHE_MS + 200);
    await admin.collection.deleteOne({ _id: key._id });
    assert.equal((await staying.findActiveByPlaintext(plaintext))?._id, key._id, 'the feed still vouched for the cached key');
    staying.stopWatching();
  });

  it('reads a key in use again in the background, answering from the cache meanwhile', async () => {
    const admin = new ApiKeyStore(database.db);
    const other = otherInstance();
    other.stopWatching();
    const { key, plaintext } = await admin.create({ accountId: 'acct_r', name: 'k', models: null });
    const cachedAt = Date.now();
    assert.equal((await other.findActiveByPlaintext(plaintext, cachedAt))?._id, key._id);
    // Revoked in the store directly, so no change feed tells the other instance.
    await admin.collection.updateOne({ _id: key._id }, { $set: { revoked_at: new Date() } });

    // Past the refresh point the cached key still answers (nobody waits for the store) and a
    // read starts behind it; once that read is back, the revocation shows before KEY_CACHE_MS.
    const refreshAt = cachedAt + KEY_REFRESH_AFTER_MS;
    assert.ok(await other.findActiveByPlaintext(plaintext, refreshAt), 'answered from the cache');
    const deadline = Date.now() + 5_000;
    let found = await other.findActiveByPlaintext(plaintext, refreshAt + 1);
    while (found && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      found = await other.findActiveByPlaintext(plaintext, refreshAt + 1);
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
