import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/engines.ts';
import { watchedDatabase, type WatchedDatabase } from '../helpers/watched-database.ts';

// A caller refused for want of balance must not make the store look the whole ledger through on
// every request. A refused movement looks for an earlier application of its operation whose
// marker a crash left unwritten; by op_id, on FerretDB, that was a scan of every entry: 0.3 to
// 0.5 s at 4,000 entries in a soak review, where a video refused for want of balance came to
// take 5 to 7 s. Only an account's head can lack its marker (store/ledger.ts), so the look is by
// _id, under an Idempotency-Key too. The api here runs on a client that reports every command.

describe('refusals for want of balance', () => {
  let shared: Awaited<ReturnType<typeof testDatabase>>;
  let monitored: WatchedDatabase;
  let api: TestApp;
  /** Looks for a ledger operation by op_id. */
  const scans = () => monitored.finds.filter((event) => 'op_id' in ((event.command as { filter?: Record<string, unknown> }).filter ?? {}));

  before(async () => {
    shared = await testDatabase('refusal_scans');
    monitored = await watchedDatabase(shared);
    api = await startTestApp('refusal_scans', {}, { database: { ...monitored, drop: () => shared.drop() } });
  });
  after(async () => {
    await api.close();
    await monitored.close();
    await shared.drop();
  });

  it('refuses video submissions, keyed or not, and a deduction the free balance cannot cover without a scan of the ledger', async () => {
    const account = await createAccount(api.app, { name: 'short', balance_usd: 0.01 });
    const { key } = await createKey(api.app, account.id);
    const submit = (headers: Record<string, string> = {}) =>
      api.app.inject({
        method: 'POST',
        url: '/v1/video/generations',
        headers: { ...bearer(key), ...headers },
        payload: { model: 'seedance-2.0', prompt: 'a lighthouse at dusk', seconds: '5', metadata: { resolution: '720p' } },
      });
    assert.equal((await submit()).statusCode, 403);
    const deduction = await api.app.inject({ method: 'POST', url: `/admin/accounts/${account.id}/deductions`, headers: adminHeaders, payload: { amount_usd: 1 } });
    assert.equal(deduction.statusCode, 409, deduction.body);
    // Under an Idempotency-Key another attempt may hold under the same task id (one that took
    // the record over, or the workflow the sweeper started), its marker not yet written: it is
    // looked for at the account's head.
    assert.equal((await submit({ 'idempotency-key': 'keyed' })).statusCode, 403);
    assert.equal((await submit({ 'idempotency-key': 'keyed' })).statusCode, 403);
    assert.deepEqual(scans().map((event) => event.command), []);
  });
});
