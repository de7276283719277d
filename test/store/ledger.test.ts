import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountStore } from '../../store/accounts.ts';
import { Ledger, MovementWithdrawn } from '../../store/ledger.ts';
import { testDatabase } from '../helpers/engines.ts';

describe('ledger: an append-only chain per account, idempotent per operation', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let accounts: AccountStore;
  let ledger: Ledger;
  before(async () => {
    database = await testDatabase('ledger');
    accounts = new AccountStore(database.db);
    ledger = new Ledger(database.db);
  });
  after(() => database.drop());

  const balances = async (accountId: string) => {
    const totals = await ledger.totals(accountId);
    return { balance: totals.balance_micros, held: totals.held_micros, spent: totals.spent_micros };
  };
  const move = (accountId: string, reference: string, operation: 'hold' | 'capture' | 'release' | 'debit' | 'trim' | 'seal', amountMicros: number) =>
    ledger.apply({ accountId, keyId: 'key_test', reference, operation, amountMicros });

  it('hold then capture moves money once, however often each is retried', async () => {
    const account = await accounts.create({ name: 'a', balanceMicros: 1_000_000 });
    assert.equal(await move(account._id, 'task_1', 'hold', 300_000), 'applied');
    assert.equal(await move(account._id, 'task_1', 'hold', 300_000), 'applied');
    assert.deepEqual(await balances(account._id), { balance: 700_000, held: 300_000, spent: 0 });
    const captures = await Promise.all(Array.from({ length: 5 }, () => move(account._id, 'task_1', 'capture', 300_000)));
    assert.deepEqual(captures, Array(5).fill('applied'));
    assert.deepEqual(await balances(account._id), { balance: 700_000, held: 0, spent: 300_000 });
  });

  it('release returns the hold once; a capture after a release is a conflict and moves nothing', async () => {
    const account = await accounts.create({ name: 'b', balanceMicros: 500_000 });
    await move(account._id, 'task_2', 'hold', 200_000);
    assert.equal(await move(account._id, 'task_2', 'release', 200_000), 'applied');
    assert.equal(await move(account._id, 'task_2', 'release', 200_000), 'applied');
    assert.equal(await move(account._id, 'task_2', 'capture', 200_000), 'conflict');
    assert.deepEqual(await balances(account._id), { balance: 500_000, held: 0, spent: 0 });
  });

  it('withdraws a movement no longer wanted when its turn comes, after the movements queued before it', async () => {
    const account = await accounts.create({ name: 'withdrawn', balanceMicros: 1_000_000 });
    let wanted = true;
    // Queued behind the first: by its turn the caller has been answered.
    const first = ledger.apply({ accountId: account._id, keyId: 'key_test', reference: 'task_first', operation: 'hold', amountMicros: 100_000, stillWanted: () => {
      wanted = false;
      return true;
    } });
    const second = ledger.apply({ accountId: account._id, keyId: 'key_test', reference: 'task_second', operation: 'hold', amountMicros: 100_000, stillWanted: () => wanted });
    assert.equal(await first, 'applied');
    await assert.rejects(second, (error: Error) => error instanceof MovementWithdrawn && /hold of task_second/.test(error.message));
    assert.deepEqual(await balances(account._id), { balance: 900_000, held: 100_000, spent: 0 });
    assert.equal(await ledger.entries.countDocuments({ reference: 'task_second' }), 0);
  });

  it('refuses a hold the balance does not cover and leaves the balance untouched', async () => {
    const account = await accounts.create({ name: 'c', balanceMicros: 99 });
    assert.equal(await move(account._id, 'task_3', 'hold', 100), 'insufficient_balance');
    assert.deepEqual(await balances(account._id), { balance: 99, held: 0, spent: 0 });
    assert.equal(await ledger.find(account._id, 'task_3', 'hold'), null, 'a refusal writes no entry');
  });

  it('50 concurrent holds against a balance for 10: exactly 10 succeed, the balance never goes negative', async () => {
    const account = await accounts.create({ name: 'd', balanceMicros: 10 * 80_000 });
    const outcomes = await Promise.all(Array.from({ length: 50 }, (_, index) => move(account._id, `task_c${index}`, 'hold', 80_000)));
    assert.equal(outcomes.filter((outcome) => outcome === 'applied').length, 10);
    assert.equal(outcomes.filter((outcome) => outcome === 'insufficient_balance').length, 40);
    assert.deepEqual(await balances(account._id), { balance: 0, held: 800_000, spent: 0 });
  });

  it('concurrent duplicates of the same operation (a stale attempt beside its retry) apply once', async () => {
    const account = await accounts.create({ name: 'e', balanceMicros: 1_000 });
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => move(account._id, 'task_4', 'hold', 400)));
    assert.ok(outcomes.every((outcome) => outcome === 'applied'));
    assert.deepEqual(await balances(account._id), { balance: 600, held: 400, spent: 0 });
    assert.equal(await ledger.entries.countDocuments({ op_id: 'task_4:hold' }), 1);
  });

  it('every entry carries the totals after it, so the chain is an audit log that adds up', async () => {
    const account = await accounts.create({ name: 'chain', balanceMicros: 10_000 });
    await Promise.all(Array.from({ length: 10 }, (_, index) => move(account._id, `task_chain${index}`, 'hold', 1_000)));
    await Promise.all(Array.from({ length: 10 }, (_, index) => move(account._id, `task_chain${index}`, index % 2 ? 'capture' : 'release', 1_000)));
    const chain = await ledger.entries.find({ account_id: account._id }).sort({ seq: 1 }).toArray();
    assert.deepEqual(chain.map((entry) => entry.seq), Array.from({ length: 21 }, (_, index) => index));
    for (const entry of chain) assert.equal(entry.balance_micros + entry.held_micros + entry.spent_micros, 10_000, `seq ${entry.seq}`);
    assert.deepEqual(await balances(account._id), { balance: 5_000, held: 0, spent: 5_000 });
  });

  it('a retry uses the first attempt\'s amount, not a different one', async () => {
    const account = await accounts.create({ name: 'f', balanceMicros: 1_000 });
    await move(account._id, 'req_1', 'debit', 100);
    assert.equal(await move(account._id, 'req_1', 'debit', 900), 'applied');
    assert.deepEqual(await balances(account._id), { balance: 900, held: 0, spent: 100 });
  });

  it('a partial capture charges the actual price and returns the rest of the hold, once', async () => {
    const account = await accounts.create({ name: 'h', balanceMicros: 1_000 });
    await move(account._id, 'req_chat', 'hold', 600);
    const capture = () => ledger.apply({ accountId: account._id, keyId: 'key_test', reference: 'req_chat', operation: 'capture', amountMicros: 150, heldMicros: 600 });
    assert.deepEqual(await Promise.all([capture(), capture(), capture()]), ['applied', 'applied', 'applied']);
    assert.deepEqual(await balances(account._id), { balance: 850, held: 0, spent: 150 });
    await assert.rejects(
      ledger.apply({ accountId: account._id, keyId: 'key_test', reference: 'req_x', operation: 'capture', amountMicros: 10, heldMicros: 5 }),
      /at least the captured amount/,
    );
  });

  it('a trim returns part of a hold once; the settlement then settles the rest', async () => {
    const account = await accounts.create({ name: 'i', balanceMicros: 1_000 });
    await move(account._id, 'lease_t', 'hold', 600);
    assert.deepEqual(await Promise.all([move(account._id, 'lease_t', 'trim', 450), move(account._id, 'lease_t', 'trim', 450)]), ['applied', 'applied']);
    assert.deepEqual(await balances(account._id), { balance: 850, held: 150, spent: 0 });
    const capture = await ledger.apply({ accountId: account._id, keyId: null, reference: 'lease_t', operation: 'capture', amountMicros: 100, heldMicros: 150 });
    assert.equal(capture, 'applied');
    assert.deepEqual(await balances(account._id), { balance: 900, held: 0, spent: 100 });
  });

  it('a seal and a trim of one reference exclude each other, whichever comes first', async () => {
    const account = await accounts.create({ name: 'j', balanceMicros: 1_000 });
    await move(account._id, 'lease_s', 'hold', 300);
    assert.equal(await move(account._id, 'lease_s', 'seal', 0), 'applied');
    assert.equal(await move(account._id, 'lease_s', 'trim', 200), 'conflict', 'a trim after the seal moves nothing');
    await move(account._id, 'lease_u', 'hold', 300);
    assert.equal(await move(account._id, 'lease_u', 'trim', 200), 'applied');
    assert.equal(await move(account._id, 'lease_u', 'seal', 0), 'conflict');
    assert.deepEqual(await balances(account._id), { balance: 600, held: 400, spent: 0 });
  });

  it('refuses float or negative amounts before touching the store', async () => {
    const account = await accounts.create({ name: 'g', balanceMicros: 1_000 });
    await assert.rejects(move(account._id, 'req_2', 'debit', 0.5), /integer micro-USD/);
    await assert.rejects(move(account._id, 'req_3', 'debit', -1), /integer micro-USD/);
  });
});
