import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountBudgets } from '../../../api/services/billing/account-budgets.ts';
import { LeaseOpenings } from '../../../api/services/billing/lease-openings.ts';
import { LeaseRecall } from '../../../api/services/billing/lease-recall.ts';
import { DEFAULT_LEASE_TIMING, type LeaseTiming } from '../../../api/services/billing/lease-timing.ts';
import { RetiredLeases } from '../../../api/services/billing/retired-leases.ts';
import { SharedAccounts } from '../../../api/services/billing/shared-accounts.ts';
import type { SpendLease } from '../../../api/services/billing/spend-lease.ts';
import { WaitingCallers } from '../../../api/services/billing/waiting-callers.ts';
import { budgetStores, chatCall, silent, type BudgetStores } from '../../helpers/budget-stores.ts';

// An opening on an account two api processes share, whose free balance covers the caller that
// opens it but not all the callers of its process waiting with it (lease-openings.ts). Once one
// of those callers saw a lease go to the others, the other process's idle lease is asked back
// first, so the new lease covers them all: else each opening served one caller from what came
// free, and the rest got 503 (CI saw 2 of 192 affordable calls refused). Before any caller lost
// an opening, nothing is asked: asking before every such opening made every call of a small
// shared account slower.

const BALANCE = 100_000;
const CALL = 20_000;

describe('an opening asks the other process back for the callers waiting with its caller', () => {
  let stores: BudgetStores;
  const closing: AccountBudgets[] = [];

  before(async () => {
    stores = await budgetStores('waiting_callers_ask');
  });
  after(async () => {
    await Promise.all(closing.map((budgets) => budgets.close()));
    await stores.database.drop();
  });

  /** A $0.10 account; another process holds an idle lease of $0.06 of it, $0.04 free. */
  async function accountWithLeaseElsewhere(name: string): Promise<string> {
    const account = await stores.accounts.create({ name, balanceMicros: BALANCE });
    const timing: Partial<LeaseTiming> = { tickMs: 20, recallPollMs: 50, idleMs: 60_000, smallLeaseIdleMs: 60_000, reservationsPerLease: 3, minLeaseMicros: 1 };
    const elsewhere = new AccountBudgets({ ...stores, log: silent, timing });
    closing.push(elsewhere);
    (await elsewhere.reserve(account._id, CALL, chatCall, 'hint')).release();
    assert.equal((await stores.ledger.totals(account._id)).balance_micros, 40_000);
    return account._id;
  }

  /** This process's openings, with three callers of `CALL` waiting (the opener among them). */
  function thisProcess(accountId: string, oneLostAnOpening: boolean) {
    const timing = { ...DEFAULT_LEASE_TIMING, tickMs: 20, recallPollMs: 50, minLeaseMicros: 1 };
    const shared = new SharedAccounts();
    shared.mark(accountId);
    const waiting = new WaitingCallers();
    const waiters = [waiting.join(accountId, CALL), waiting.join(accountId, CALL), waiting.join(accountId, CALL)];
    if (oneLostAnOpening) waiters[1]!.lostOpening();
    const installed: SpendLease[] = [];
    const openings = new LeaseOpenings({
      ledger: stores.ledger,
      leases: stores.leases,
      timing,
      retired: new RetiredLeases({ ...stores, log: silent }),
      recall: new LeaseRecall(stores.leases, stores.ledger, timing),
      shared,
      waiting,
      current: () => undefined,
      install: (lease) => installed.push(lease),
      retire: () => {},
      referencesOf: () => installed.map((lease) => lease.reference),
      takeUnderWay: () => undefined,
    });
    return { openings, installed };
  }

  it('once a waiting caller lost an opening: the new lease covers all three', async () => {
    const accountId = await accountWithLeaseElsewhere('lost-one');
    const { openings, installed } = thisProcess(accountId, true);
    assert.deepEqual(await openings.open(accountId, CALL, 'replace'), { opened: true });
    assert.equal(installed[0]?.amountMicros, 3 * CALL, 'a lease for the three waiting callers');
    assert.equal(await stores.leases.collection.countDocuments({ account_id: accountId, _id: { $ne: installed[0]!.reference } }), 0, "the other process's lease was given back");
  });

  it('before any caller lost an opening: nothing is asked, the lease holds what is free', async () => {
    const accountId = await accountWithLeaseElsewhere('none-lost');
    const { openings, installed } = thisProcess(accountId, false);
    assert.deepEqual(await openings.open(accountId, CALL, 'replace'), { opened: true });
    assert.equal(installed[0]?.amountMicros, 40_000);
    const [elsewhere] = await stores.leases.collection.find({ account_id: accountId, _id: { $ne: installed[0]!.reference } }).toArray();
    assert.equal(elsewhere?.recalled_at, undefined, 'the other process was not asked');
  });
});
