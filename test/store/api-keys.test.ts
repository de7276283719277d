import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { KEY_CHANGE_POLL_MS } from '../../store/api-key-changes.ts';
import { KEY_CACHE_MS, KEY_REFRESH_AFTER_MS, settleRead, sharedStateOf } from '../../store/api-key-cache.ts';
import { ApiKeyStore } from '../../store/api-keys.ts';
import { testDatabase } from '../helpers/engines.ts';

// Authentication reads keys through a cache. A revocation must reach the process that made it
// at once, through any store over the same database, and every other process within
// KEY_CACHE_MS (here: a store over a second Db handle, as another API instance has its own),
// through the change feed while it is live, or because reads age out when it is not.

describe('API key lookups', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('api-keys');
  });
  after(() => database.drop());

  function otherInstance(): ApiKeyStore {
    return new ApiKeyStore(database.client.db(database.db.databaseName));
  }

  /** Milliseconds until `holds` is true, checked every 10 ms (fails with `message` after 5 s). */
  async function until(holds: () => Promise<boolean>, message: string): Promise<number> {
    const started = Date.now();
    while (!(await holds())) {
      assert.ok(Date.now() - started < 5_000, message);
      await pause(10);
    }
    return Date.now() - started;
  }

  /** Milliseconds until `store` refuses the key. */
  function refusedAfter(store: ApiKeyStore, plaintext: string): Promise<number> {
    return until(async () => (await store.findActiveByPlaintext(plaintext)) === null, 'still accepted after 5 s');
  }

  /** A new key that each of `stores` has read (and so holds in memory). */
  async function keyReadBy(accountId: string, ...stores: ApiKeyStore[]) {
    const created = await new ApiKeyStore(database.db).create({ accountId, name: 'k', models: null });
    for (const store of stores) assert.ok(await store.findActiveByPlaintext(created.plaintext));
    return created;
  }

  /** Past KEY_CACHE_MS, deletes the key behind every feed's back: only a read in line notices. */
  async function deleteOnceIdle(keyId: string): Promise<void> {
    await pause(KEY_CACHE_MS + 200);
    await new ApiKeyStore(database.db).collection.deleteOne({ _id: keyId });
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

  it('keeps a revocation that races the key being used, and still reports when it was used', async () => {
    // On FerretDB an update is a read-modify-write without isolation: noting a use on the key
    // document itself wrote revoked keys back as live, 15 races in 40. Uses are noted apart.
    const users = [new ApiKeyStore(database.db), new ApiKeyStore(database.db), new ApiKeyStore(database.db)];
    const admin = new ApiKeyStore(database.db);
    for (let trial = 0; trial < 40; trial++) {
      const { key, plaintext } = await admin.create({ accountId: 'acct_race', name: `k${trial}`, models: null });
      await Promise.all([admin.revoke(key._id), ...users.map((user, index) => user.noteUsed(key._id, Date.now() + trial * 60_000 + index))]);
      await pause(20);
      const stored = await admin.collection.findOne({ _id: key._id });
      assert.ok(stored?.revoked_at, `trial ${trial}: the revocation was undone`);
      const fresh = otherInstance();
      assert.equal(await fresh.findActiveByPlaintext(plaintext), null, `trial ${trial}`);
      fresh.stopWatching();
    }
    const listed = await admin.listForAccount('acct_race');
    assert.equal(listed.length, 40);
    assert.ok(listed.every((key) => key.last_used_at instanceof Date && key.revoked_at instanceof Date));
  });

  it('changes the models a key may use: at once in this process, within the cache time elsewhere, and never undoing a revocation', async () => {
    const admin = new ApiKeyStore(database.db);
    const other = otherInstance();
    const { key, plaintext } = await admin.create({ accountId: 'acct_models', name: 'k', models: ['seedance-2.0'] });
    assert.deepEqual((await other.findActiveByPlaintext(plaintext))?.models, ['seedance-2.0']);
    const changed = await admin.setModels(key._id, ['gpt-4o-mini', 'gpt-4o-mini', 'sora-2']);
    assert.deepEqual(changed?.models, ['gpt-4o-mini', 'sora-2'], 'each model once');
    assert.deepEqual((await admin.findActiveByPlaintext(plaintext))?.models, ['gpt-4o-mini', 'sora-2']);
    const elapsed = await until(async () => ((await other.findActiveByPlaintext(plaintext)) as { models: string[] | null } | null)?.models?.includes('sora-2') === true, 'another instance still sees the old models after 5 s');
    assert.ok(elapsed < KEY_CACHE_MS, `another instance saw the change after ${elapsed} ms`);
    // Every read joins the change: a listing, a lookup by id, a fresh instance.
    assert.deepEqual((await admin.listForAccount('acct_models'))[0]?.models, ['gpt-4o-mini', 'sora-2']);
    assert.deepEqual((await admin.find(key._id))?.models, ['gpt-4o-mini', 'sora-2']);
    assert.equal((await admin.setModels(key._id, null))?.models, null, 'null: every model');
    const fresh = otherInstance();
    assert.equal((await fresh.findActiveByPlaintext(plaintext))?.models, null);
    fresh.stopWatching();
    // The key document keeps the models it was created with: a change is a document of its own.
    assert.deepEqual((await admin.collection.findOne({ _id: key._id }))?.models, ['seedance-2.0']);
    assert.equal(await admin.setModels('key_none', ['sora-2']), null);
    // A read that started before a change and lands after it (a background refresh that read
    // the old models) is not cached as fresh in the process that made the change.
    const readStartedAt = Date.now() - 1;
    const staleRead = await admin.collection.findOne({ _id: key._id });
    await admin.setModels(key._id, ['sora-2']);
    settleRead(sharedStateOf(database.db), key._id, staleRead, readStartedAt, readStartedAt);
    assert.deepEqual((await admin.findActiveByPlaintext(plaintext))?.models, ['sora-2']);
    await admin.setModels(key._id, null);
    // A change racing a revocation never writes the key back live (see the race above).
    for (let trial = 0; trial < 20; trial++) {
      const racing = await admin.create({ accountId: 'acct_models', name: `r${trial}`, models: null });
      await Promise.all([admin.revoke(racing.key._id), admin.setModels(racing.key._id, ['sora-2'])]);
      assert.ok((await admin.collection.findOne({ _id: racing.key._id }))?.revoked_at, `trial ${trial}: the revocation was undone`);
    }
    other.stopWatching();
  });

  it('does not let a lookup join a read of the key that was under way when this process changed it', async () => {
    const admin = new ApiKeyStore(database.db);
    const { key, plaintext } = await admin.create({ accountId: 'acct_joined', name: 'k', models: ['seedance-2.0'] });
    const shared = sharedStateOf(database.db);
    shared.cache.delete(key._id);
    // A read of the key's old models still on its way back (a lookup's, which later lookups join).
    const stale = await admin.collection.findOne({ _id: key._id });
    let land!: () => void;
    shared.reading.set(key._id, new Promise((resolve) => (land = () => resolve(stale))));
    await admin.setModels(key._id, ['sora-2']);
    const after = admin.findActiveByPlaintext(plaintext);
    land();
    assert.deepEqual((await after)?.models, ['sora-2'], "the key's next lookup read the change");
  });

  it('answers an idle key from memory while the change feed is live, and reads it again when the feed is not', async () => {
    const live = otherInstance();
    const stalled = otherInstance();
    const { key, plaintext } = await keyReadBy('acct_i', live, stalled);
    stalled.stopWatching();
    await deleteOnceIdle(key._id);
    assert.equal((await live.findActiveByPlaintext(plaintext))?._id, key._id, 'no read in line: the feed vouched for the cached key');
    assert.equal(await stalled.findActiveByPlaintext(plaintext), null, 'without a live feed the read aged out after KEY_CACHE_MS');
    // The call the cache answered started a background read, which the next calls see.
    assert.ok((await refusedAfter(live, plaintext)) < 1_000);
    live.stopWatching();
  });

  it('reports each change once: after reading the changed key again, another instance keeps it in memory', async () => {
    const admin = new ApiKeyStore(database.db);
    const other = otherInstance();
    const { key, plaintext } = await keyReadBy('acct_o', other);
    await admin.setRateLimits(key._id, { requests_per_minute: 7 });
    await until(async () => (await other.findActiveByPlaintext(plaintext))?.rate_limits?.requests_per_minute === 7, 'the new limits never reached the other instance');
    // The change is recorded twice (before and after the update): the new limits can show
    // before the second record's poll, which drops the read once more. Let both be seen, and
    // read the key again if that dropped it.
    await pause(KEY_CHANGE_POLL_MS * 3);
    assert.equal((await other.findActiveByPlaintext(plaintext))?.rate_limits?.requests_per_minute, 7);
    // That call may have made the key due for a background read; a read landing after the
    // deletion below would drop the entry for its own reason. Let the next round take it.
    await pause(2 * KEY_REFRESH_AFTER_MS + 300);
    // Gone behind the feed's back: only a read in line would notice (nobody looks the key up
    // meanwhile, so no round reads it). Several polls later, still within the 5 s the change's
    // record stays visible, the change must not drop the read again.
    await admin.collection.deleteOne({ _id: key._id });
    await pause(KEY_REFRESH_AFTER_MS + 300);
    assert.equal((await other.findActiveByPlaintext(plaintext))?._id, key._id, 'answered from memory');
    other.stopWatching();
  });

  it('keeps the change feed polling while another store over the same database still watches it', async () => {
    const db = database.client.db(database.db.databaseName);
    const closing = new ApiKeyStore(db);
    const staying = new ApiKeyStore(db);
    const { key, plaintext } = await keyReadBy('acct_w', closing, staying);
    closing.stopWatching();
    await deleteOnceIdle(key._id);
    assert.equal((await staying.findActiveByPlaintext(plaintext))?._id, key._id, 'the feed still vouched for the cached key');
    staying.stopWatching();
  });

  it('reads keys in use again in the background, answering from the cache meanwhile', async () => {
    const admin = new ApiKeyStore(database.db);
    const other = otherInstance();
    const { key, plaintext } = await keyReadBy('acct_r', other);
    // Revoked in the store directly, so no change feed tells the other instance: only the
    // background reads of keys in use can notice.
    await admin.collection.updateOne({ _id: key._id }, { $set: { revoked_at: new Date() } });
    const started = Date.now();
    let answer = other.findActiveByPlaintext(plaintext);
    while (answer !== null) {
      // Every lookup is answered from memory, without a promise: nobody waits for those reads.
      assert.ok(!(answer instanceof Promise), 'a lookup waited for the store');
      assert.equal(answer._id, key._id);
      assert.ok(Date.now() - started < 5_000, 'the revocation never showed');
      await pause(20);
      answer = other.findActiveByPlaintext(plaintext);
    }
    // Due once its entry is KEY_REFRESH_AFTER_MS old, read in the round after that.
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 2 * KEY_REFRESH_AFTER_MS + 1_000, `the revocation showed after ${elapsed} ms`);
    other.stopWatching();
  });

  it('does not read keys nobody looks up', async () => {
    const admin = new ApiKeyStore(database.db);
    const other = otherInstance();
    const { key, plaintext } = await keyReadBy('acct_q', other);
    await admin.collection.updateOne({ _id: key._id }, { $set: { revoked_at: new Date() } });
    // Idle for several rounds: the entry is not refreshed (the feed vouches for it), so the
    // direct change stays unseen, which tells that no round read the key.
    await pause(3 * KEY_REFRESH_AFTER_MS);
    const answer = other.findActiveByPlaintext(plaintext);
    assert.ok(!(answer instanceof Promise) && answer?._id === key._id, 'an idle key was read again');
    other.stopWatching();
  });

  it('fails a revocation the store cannot record, with nothing changed', async () => {
    // Its own database: a unique index on the feed's key ids makes the store refuse the record
    // of a change to a key that already has one, and other tests record many per key.
    const refusing = await testDatabase('api-keys-unrecorded');
    const store = new ApiKeyStore(refusing.db);
    const elsewhere = new ApiKeyStore(refusing.client.db(refusing.db.databaseName));
    try {
      const { key, plaintext } = await store.create({ accountId: 'acct_z', name: 'k', models: null });
      assert.ok(await store.findActiveByPlaintext(plaintext));
      const changes = refusing.db.collection('api_key_changes');
      await changes.createIndex({ key_id: 1 }, { unique: true });
      await changes.insertOne({ key_id: key._id, at: new Date() });

      await assert.rejects(store.revoke(key._id), /duplicate key|E11000/);
      // Other processes could not have been told: the key must still be live everywhere, so a
      // retry of the revocation is the whole of the repair.
      assert.equal((await store.collection.findOne({ _id: key._id }))?.revoked_at, null, 'revoked in the store without a record');
      assert.ok(await store.findActiveByPlaintext(plaintext), 'refused in this process without a record');
      assert.ok(await elsewhere.findActiveByPlaintext(plaintext), 'refused by another instance without a record');
    } finally {
      store.stopWatching();
      elsewhere.stopWatching();
      await refusing.drop();
    }
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
