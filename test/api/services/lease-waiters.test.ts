import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountBudgets } from '../../../api/services/billing/account-budgets.ts';
import type { LeaseTiming } from '../../../api/services/billing/lease-timing.ts';
import type { Reservation } from '../../../api/services/billing/spend-lease.ts';
import { GatewayError } from '../../../core/errors.ts';
import type { Ledger } from '../../../store/ledger.ts';
import { budgetStores, chatCall, silent, type BudgetStores } from '../../helpers/budget-stores.ts';
import { settledAccount } from '../../helpers/settled-account.ts';

// Callers of one process waiting together for a lease of a small account (the opening sizes the
// lease for all of them, api/services/billing/account-budgets.ts): one the account cannot afford
// must not drag the others into its refusal, nor wait for what cannot make up its cost (one of
// the process's settlements in its retries' backoff after a store blip, say).

describe('callers waiting for a lease of a small account', () => {
  let stores: BudgetStores;

  before(async () => {
    stores = await budgetStores('lease_waiters');
  });
  after(() => stores.database.drop());

  function budgets(timing: Partial<LeaseTiming> = {}, ledger: Ledger = stores.ledger): AccountBudgets {
    return new AccountBudgets({ ...stores, ledger, log: silent, timing: { tickMs: 20, ...timing } });
  }

  /** The reservation, or the refusal's error code, and how long it took. */
  async function timed(reserving: Reservation | Promise<Reservation>): Promise<{ reservation?: Reservation; code?: string; ms: number }> {
    const started = Date.now();
    try {
      const reservation = await reserving;
      return { reservation, ms: Date.now() - started };
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      return { code: error.code, ms: Date.now() - started };
    }
  }

  it('serves the affordable callers that joined the opening of one the account cannot afford', async () => {
    const account = await stores.accounts.create({ name: 'joined', balanceMicros: 100_000 });
    const budget = budgets();
    const big = timed(budget.reserve(account._id, 200_000, chatCall, 'hint'));
    const small = Array.from({ length: 3 }, () => timed(budget.reserve(account._id, 5_000, chatCall, 'hint')));
    const [refused, ...served] = await Promise.all([big, ...small]);
    assert.equal(refused!.code, 'insufficient_balance');
    assert.deepEqual(
      served.map((outcome) => outcome.code ?? 'served'),
      ['served', 'served', 'served'],
    );
    for (const outcome of served) outcome.reservation!.release();
    await budget.close();
    assert.equal((await settledAccount(stores.accounts, account._id)).balance_micros, 100_000);
  });

  it('refuses at once what all the account holds cannot cover, while a settlement waits out a store blip', async () => {
    const account = await stores.accounts.create({ name: 'blip', balanceMicros: 100_000 });
    // The account's first two settlements fail: the retired lease's settlement backs off.
    let failures = 2;
    const flaky = Object.create(stores.ledger) as Ledger;
    flaky.apply = async (input) => {
      if ((input.operation === 'capture' || input.operation === 'release') && input.accountId === account._id && failures > 0) {
        failures--;
        throw new Error('store blip');
      }
      return stores.ledger.apply(input);
    };
    const budget = budgets({ idleMs: 50, smallLeaseIdleMs: 50 }, flaky);
    const first = await budget.reserve(account._id, 5_000, chatCall, 'hint');
    first.charge(1_000, { outputTokens: 1 }, { allowOverage: false });
    // Idle: the lease retires, and its settlement fails and backs off.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.ok(failures < 2, 'the settlement met the blip');

    const unaffordable = await timed(budget.reserve(account._id, 500_000, chatCall, 'hint'));
    assert.equal(unaffordable.code, 'insufficient_balance');
    assert.ok(unaffordable.ms < 300, `refused in ${unaffordable.ms} ms`);
    // The money comes back once the settlement gets through; then an affordable call is served.
    const affordable = await timed(settledAccount(stores.accounts, account._id).then(() => budget.reserve(account._id, 5_000, chatCall, 'hint')));
    assert.ok(affordable.reservation, `the affordable call was refused: ${affordable.code}`);
    affordable.reservation.release();
    await budget.close();
    const settled = await settledAccount(stores.accounts, account._id);
    assert.equal(settled.spent_micros, 1_000);
    assert.equal(settled.balance_micros, 99_000);
  });
});
