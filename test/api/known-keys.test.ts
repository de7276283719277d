import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { READS_PER_WINDOW, WINDOW_MS } from '../../api/plugins/unknown-key-throttle.ts';
import { generateApiKey } from '../../core/api-keys.ts';
import { connectDatabase } from '../../store/database.ts';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/engines.ts';
import { waitUntil } from '../helpers/wait-until.ts';
import { clearOfWindowEdge } from '../helpers/window-edge.ts';

// The unknown-key throttle holds up guesses, not keys: an address that sent too many unknown
// keys (a broken client behind an office's one NAT address) is answered 429 for keys no process
// cache holds, but a real key is still read and served, whichever api process created it
// (store/known-key-ids.ts). Two api processes on one store, each with its own connection, as
// in production.

describe('real keys from an address sending unknown ones', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let first: TestApp;
  let second: TestApp | undefined;
  let secondConnection: Awaited<ReturnType<typeof connectDatabase>> | undefined;
  let accountId: string;
  let keyBeforeSecond: string;

  before(async () => {
    database = await testDatabase('known_keys');
    first = await startTestApp('known_keys_first', {}, { database });
    accountId = (await createAccount(first.app, { name: 'known keys', balance_usd: 1 })).id;
    // Created before the second process starts: it lists it.
    keyBeforeSecond = (await createKey(first.app, accountId, { name: 'before the second' })).key;
  });
  after(async () => {
    await second?.close();
    await secondConnection?.close();
    await first.close();
    await database.drop();
  });

  const get = (app: TestApp, key: string, remoteAddress: string) => app.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key), remoteAddress });

  /** Sends unknown keys from the address until it is refused: its window's reads are used up. */
  async function exhaust(app: TestApp, remoteAddress: string): Promise<void> {
    const statuses: number[] = [];
    for (let index = 0; index <= READS_PER_WINDOW; index++) statuses.push((await get(app, generateApiKey().plaintext, remoteAddress)).statusCode);
    assert.deepEqual(statuses, [...Array(READS_PER_WINDOW).fill(401), 429]);
  }

  it('serves a key created on this process, never read here before, to an address past its unknown keys', async () => {
    await clearOfWindowEdge(WINDOW_MS, 6_000);
    await exhaust(first, '203.0.113.40');
    const fresh = await createKey(first.app, accountId, { name: 'fresh' });
    assert.equal((await get(first, fresh.key, '203.0.113.40')).statusCode, 200);
    // Guesses from there are still refused unread; a key revoked is a 401, not a 429.
    assert.equal((await get(first, generateApiKey().plaintext, '203.0.113.40')).statusCode, 429);
    assert.equal((await first.app.inject({ method: 'DELETE', url: `/admin/keys/${fresh.id}`, headers: adminHeaders })).statusCode, 200);
    assert.equal((await get(first, fresh.key, '203.0.113.40')).statusCode, 401);
  });

  it('serves keys another process created, before it started or since (announced through the change feed)', async () => {
    // The feed's records go: its first poll would otherwise announce the key created in
    // before() to the second process, which must find it by listing the keys.
    await database.db.collection('api_key_changes').deleteMany({});
    secondConnection = await connectDatabase(process.env.FRAMEGATE_TEST_MONGODB_URI!, database.db.databaseName);
    second = await startTestApp('known_keys_second', {}, { database: { ...secondConnection, drop: async () => undefined } });
    const other = second;
    await clearOfWindowEdge(WINDOW_MS, 6_000);
    await exhaust(other, '203.0.113.41');
    // The key listed when the second process started looking keys up.
    assert.equal((await get(other, keyBeforeSecond, '203.0.113.41')).statusCode, 200);
    // A key the first process creates now: the second hears of it within a few polls of the feed.
    const since = (await createKey(first.app, accountId, { name: 'since' })).key;
    await waitUntil(async () => (await get(other, since, '203.0.113.41')).statusCode === 200, 3_000);
    assert.equal((await get(other, generateApiKey().plaintext, '203.0.113.41')).statusCode, 429);
  });
});
