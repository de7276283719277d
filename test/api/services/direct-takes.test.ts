import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountBudgets } from '../../../api/services/billing/account-budgets.ts';
import { budgetStores, chatCall, silent, type BudgetStores } from '../../helpers/budget-stores.ts';

// A video task's hold (and an operator's deduction) takes money from the account directly. On
// an account under $1 a spend lease holds the whole balance; the take gives it back first, and
// must get it before the process's chat callers, waiting for a lease, lease it all again. A
// review saw 5 of 12 affordable video submissions refused 403 while tiny chat calls ran on a
// $0.80 account (api/services/billing/direct-takes.ts).

const BALANCE = 800_000;
/** A chat call's worst case, and what it costs. */
const WORST = 10_000;
const SPENT = 10;
const VIDEO = 150_000;
const TAKES = 4;

describe('direct takes beside chat calls on a small account', () => {
  let stores: BudgetStores;

  before(async () => {
    stores = await budgetStores('direct_takes');
  });
  after(() => stores.database.drop());

  it('gives every affordable video hold its money while four chat callers keep reserving', async () => {
    const account = await stores.accounts.create({ name: 'small-busy', balanceMicros: BALANCE });
    // Production's lease sizes and idle times: the first lease holds the whole balance.
    const budget = new AccountBudgets({ ...stores, log: silent, timing: { tickMs: 20 } });
    let running = true;
    let calls = 0;
    const chatter = async () => {
      while (running) {
        const reservation = await budget.reserve(account._id, WORST, chatCall, 'hint');
        await new Promise((resolve) => setTimeout(resolve, 2));
        reservation.charge(SPENT, { outputTokens: 1 }, { allowOverage: false });
        calls++;
      }
    };
    const chatters = Array.from({ length: 4 }, () => chatter());
    const outcomes: string[] = [];
    try {
      for (let take = 0; take < TAKES; take++) {
        await new Promise((resolve) => setTimeout(resolve, 150));
        const hold = () => stores.ledger.apply({ accountId: account._id, keyId: 'key_video', reference: `task_direct_${take}`, operation: 'hold', amountMicros: VIDEO });
        const first = await hold();
        outcomes.push(first === 'insufficient_balance' ? (await budget.takeWithLeasesBack(account._id, VIDEO, hold)).result : first);
      }
    } finally {
      running = false;
      await Promise.all(chatters);
    }
    assert.ok(calls > 20, `the chat callers kept calling (${calls} calls)`);
    // Affordable throughout: four holds and four calls' worst cases are $0.64 of $0.80.
    assert.deepEqual(outcomes, Array(TAKES).fill('applied'));
    // The process settles its leases as it closes; the video holds stay until their tasks end.
    await budget.close();
    const settled = (await stores.accounts.find(account._id))!;
    assert.equal(settled.held_micros, TAKES * VIDEO);
    assert.equal(settled.spent_micros, calls * SPENT);
    assert.equal(settled.balance_micros, BALANCE - TAKES * VIDEO - calls * SPENT);
  });

  it('asks no lease back for a take whose caller was answered while it waited its turn', async () => {
    const account = await stores.accounts.create({ name: 'small-answered', balanceMicros: BALANCE });
    const budget = new AccountBudgets({ ...stores, log: silent, timing: { tickMs: 20 } });
    try {
      // A chat call's lease holds the whole balance of a small account.
      (await budget.reserve(account._id, WORST, chatCall, 'hint')).release();
      const hold = () => stores.ledger.apply({ accountId: account._id, keyId: 'key_video', reference: 'task_answered', operation: 'hold', amountMicros: VIDEO });
      assert.equal(await hold(), 'insufficient_balance', 'the lease holds the balance');
      const entries = () => stores.ledger.entries.countDocuments({ account_id: account._id });
      const before = await entries();
      const answered = await budget.takeWithLeasesBack(account._id, VIDEO, hold, () => false);
      assert.deepEqual(answered, { result: 'insufficient_balance', unanswered: null });
      assert.equal(await entries(), before, 'the lease was neither retired nor trimmed');
      // Still wanted, the same take gets its money back from the lease.
      assert.equal((await budget.takeWithLeasesBack(account._id, VIDEO, hold)).result, 'applied');
      assert.ok((await entries()) > before + 1);
    } finally {
      await budget.close();
    }
  });
});
