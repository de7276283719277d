import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Db } from 'mongodb';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger } from '../../store/ledger.ts';
import { markEveryLedgerEntry } from '../../store/ledger-marker-migration.ts';
import { testDatabase } from '../helpers/engines.ts';
import { watchedDatabase, type WatchedDatabase } from '../helpers/watched-database.ts';

// A crash between a ledger entry and its marker leaves the entry unmarked. The ledger finds
// applied operations by _id alone (stock FerretDB scanned the whole collection for anything
// else: 0.3 to 1.25 s at 4,000 to 5,400 entries in reviews), which holds only while an unmarked entry
// can be nothing but its account's head. These tests make the crash by deleting a marker, and
// watch every command the ledger sends.

describe('ledger markers: an operation is found by _id alone, after a crash too', () => {
  let shared: Awaited<ReturnType<typeof testDatabase>>;
  let monitored: WatchedDatabase;
  let db: Db;
  let accounts: AccountStore;

  before(async () => {
    shared = await testDatabase('ledger_markers');
    monitored = await watchedDatabase(shared);
    db = monitored.db;
    accounts = new AccountStore(shared.db);
  });
  after(async () => {
    await monitored.close();
    await shared.drop();
  });
  beforeEach(() => {
    monitored.finds.length = 0;
  });

  /** The finds the ledger sent whose filter names anything but _id. */
  const scans = () => monitored.scans();
  const crashBeforeMarker = (reference: string, slot: string) => db.collection('ledger_ops').deleteOne({ _id: `${reference}:${slot}` as never });
  const entriesOf = (reference: string) => db.collection('ledger').countDocuments({ reference });
  /** A ledger's parts the race below steps into. */
  const internals = (ledger: Ledger) =>
    ledger as unknown as {
      markers: { find(opId: string): Promise<unknown>; mark(entry: unknown): Promise<void> };
      applyNow(input: Parameters<Ledger['apply']>[0], hold: number): Promise<string>;
    };

  it('an entry left unmarked at the head is found, and its retry applies nothing more', async () => {
    const account = await accounts.create({ name: 'head', balanceMicros: 1_000 });
    const ledger = new Ledger(db);
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_h', operation: 'hold', amountMicros: 300 }), 'applied');
    await crashBeforeMarker('task_h', 'hold');

    assert.equal((await ledger.find(account._id, 'task_h', 'hold'))?.amount_micros, 300);
    assert.equal(await new Ledger(db).apply({ accountId: account._id, keyId: null, reference: 'task_h', operation: 'hold', amountMicros: 300 }), 'applied');
    assert.equal(await new Ledger(db).apply({ accountId: account._id, keyId: null, reference: 'task_h', operation: 'release', amountMicros: 300 }), 'applied');
    assert.equal(await entriesOf('task_h'), 2, 'one hold and one release');
    assert.equal((await ledger.totals(account._id)).balance_micros, 1_000);
    assert.deepEqual(scans(), []);
  });

  it('a movement marks the unmarked head it builds on, in another process too', async () => {
    const account = await accounts.create({ name: 'built-on', balanceMicros: 1_000 });
    await new Ledger(db).apply({ accountId: account._id, keyId: null, reference: 'task_b', operation: 'hold', amountMicros: 300 });
    await crashBeforeMarker('task_b', 'hold');

    // A second process, which knows nothing of the first's writes, appends over it.
    const other = new Ledger(db);
    assert.equal(await other.apply({ accountId: account._id, keyId: null, reference: 'task_c', operation: 'hold', amountMicros: 200 }), 'applied');
    assert.ok(await db.collection('ledger_ops').findOne({ _id: 'task_b:hold' as never }), 'the entry below the new head is marked');

    // No longer the head, it is still found, and still applies once.
    assert.equal((await other.find(account._id, 'task_b', 'hold'))?.amount_micros, 300);
    assert.equal(await other.apply({ accountId: account._id, keyId: null, reference: 'task_b', operation: 'hold', amountMicros: 300 }), 'applied');
    assert.equal(await entriesOf('task_b'), 1);
    assert.deepEqual(await other.totals(account._id), { balance_micros: 500, held_micros: 500, spent_micros: 0 });
    assert.deepEqual(scans(), []);
  });

  it('a retry is not refused on a head that its original, gone in unmarked since, has passed', async () => {
    const account = await accounts.create({ name: 'race', balanceMicros: 100 });
    const first = new Ledger(db);
    await first.apply({ accountId: account._id, keyId: null, reference: 'lease_race', operation: 'hold', amountMicros: 100 });
    const retry = new Ledger(db);
    const retryMarkers = internals(retry).markers;
    const readMarker = retryMarkers.find.bind(retryMarkers);
    let raced = false;
    // Between the retry's read of the head (balance 0) and its look for a marker: the lease
    // gives its money back, and the original hold (a video's workflow, under the same task id)
    // goes in on it, its marker not yet written. Movements of one account queue within a
    // process, so the racing writes here skip the queue.
    retryMarkers.find = async (opId: string) => {
      if (!raced && opId === 'task_race:hold') {
        raced = true;
        assert.equal(await internals(first).applyNow({ accountId: account._id, keyId: null, reference: 'lease_race', operation: 'trim', amountMicros: 100 }, 100), 'applied');
        const original = new Ledger(db);
        internals(original).markers.mark = async () => undefined;
        assert.equal(await internals(original).applyNow({ accountId: account._id, keyId: null, reference: 'task_race', operation: 'hold', amountMicros: 100 }, 100), 'applied');
      }
      return readMarker(opId);
    };
    assert.equal(await retry.apply({ accountId: account._id, keyId: null, reference: 'task_race', operation: 'hold', amountMicros: 100 }), 'applied');
    assert.ok(raced);
    assert.equal(await entriesOf('task_race'), 1);
  });

  it('neither a refusal nor a look for what was never applied scans the ledger', async () => {
    const account = await accounts.create({ name: 'refused', balanceMicros: 100 });
    const ledger = new Ledger(db);
    await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_r0', operation: 'hold', amountMicros: 50 });
    // A retried reference (an Idempotency-Key's task id), refused: the look for an earlier
    // application of it used to be a scan.
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_r1', operation: 'hold', amountMicros: 80 }), 'insufficient_balance');
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_r1', operation: 'hold', amountMicros: 80 }), 'insufficient_balance');
    assert.equal(await ledger.find(account._id, 'task_r1', 'hold'), null);
    assert.equal(await ledger.find(account._id, 'task_r0', 'capture'), null);
    assert.ok(monitored.finds.length > 0, 'the ledger was watched');
    assert.deepEqual(scans().map((event) => event.command), []);
  });
});

describe('ledger markers: the migration marks entries from before the rule', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('ledger_marker_migration');
  });
  after(() => database.drop());

  it('marks every unmarked entry once, records it, and is not run again', async () => {
    const { db } = database;
    const account = await new AccountStore(db).create({ name: 'legacy', balanceMicros: 1_000 });
    const ledger = new Ledger(db);
    for (const reference of ['task_l1', 'task_l2', 'task_l3']) {
      await ledger.apply({ accountId: account._id, keyId: null, reference, operation: 'hold', amountMicros: 100 });
    }
    // Code from before the rule could leave a gap below the head.
    await db.collection('ledger_ops').deleteMany({ _id: { $in: ['task_l1:hold', 'task_l2:hold'] as never[] } });
    await db.collection('migrations').deleteOne({ _id: 'ledger-every-entry-marked' as never });

    await markEveryLedgerEntry(db);
    const marked = await db.collection('ledger_ops').find({ _id: { $in: ['task_l1:hold', 'task_l2:hold', 'task_l3:hold'] as never[] } }).toArray();
    assert.equal(marked.length, 3);
    assert.ok(await db.collection('migrations').findOne({ _id: 'ledger-every-entry-marked' as never }));
    assert.equal(await ledger.apply({ accountId: account._id, keyId: null, reference: 'task_l1', operation: 'hold', amountMicros: 100 }), 'applied');
    assert.equal(await db.collection('ledger').countDocuments({ reference: 'task_l1' }), 1, 'the marked hold was not applied again');

    // Recorded: a later start does not look the ledger through again.
    await db.collection('ledger_ops').deleteOne({ _id: 'task_l1:hold' as never });
    await markEveryLedgerEntry(db);
    assert.equal(await db.collection('ledger_ops').countDocuments({ _id: 'task_l1:hold' as never }), 0);
  });
});
