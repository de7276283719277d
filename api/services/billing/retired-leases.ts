import type { FastifyBaseLogger } from 'fastify';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import type { Ledger, LedgerOutcome } from '../../../store/ledger.ts';
import type { UsageStore } from '../../../store/usage.ts';
import type { SpendLease } from './spend-lease.ts';

// How a spend lease goes back to the ledger once it takes no more calls (account-budgets.ts
// retires it): it settles when its last call has ended, with usage records first (idempotent
// ids), then the capture of what its calls cost (the rest of the hold returns to the balance in
// the same entry), then its lease document is deleted.
//
// A caller short of money need not wait for the calls still running on a retired lease (a long
// stream, say): the lease trims its unreserved rest back to the balance at once, and its
// settlement later captures from what is left. A trim is one ledger entry in a slot of its own
// (store/ledger.ts), applied at most once however often it is retried.

const SETTLE_ATTEMPTS = 5;

export interface RetiredLeaseStores {
  ledger: Ledger;
  leases: BudgetLeaseStore;
  usage: UsageStore;
  log: Pick<FastifyBaseLogger, 'warn' | 'error'>;
}

export class RetiredLeases {
  private readonly retired = new Set<SpendLease>();
  private readonly settlements = new Map<SpendLease, Promise<void>>();
  private readonly trims = new Map<SpendLease, Promise<boolean>>();

  constructor(private readonly stores: RetiredLeaseStores) {}

  /** Takes a closed lease; it settles at once when no call runs on it. */
  add(lease: SpendLease): void {
    this.retired.add(lease);
    if (lease.isDrained) this.settle(lease);
  }

  /** The retired leases not settled yet. */
  all(): SpendLease[] {
    return [...this.retired];
  }

  /** Settles `lease` (once) in the background; its last call must have ended. */
  settle(lease: SpendLease): void {
    if (this.settlements.has(lease)) return;
    const settlement = this.settleWithRetries(lease).finally(() => {
      this.retired.delete(lease);
      this.settlements.delete(lease);
      this.trims.delete(lease);
    });
    this.settlements.set(lease, settlement);
  }

  /** The settlement of `lease`, when one is under way. */
  settlementOf(lease: SpendLease): Promise<void> | undefined {
    return this.settlements.get(lease);
  }

  /** Every settlement under way, of `accountId`'s leases or of all. */
  settlementsUnderWay(accountId?: string): Promise<void>[] {
    return [...this.settlements].filter(([lease]) => accountId === undefined || lease.accountId === accountId).map(([, settlement]) => settlement);
  }

  /** Trims the unreserved rest of every retired lease of `accountId` that calls still run on;
   * true when some money went back to the balance. */
  async trimAll(accountId: string): Promise<boolean> {
    const trimming = [...this.retired].filter((lease) => lease.accountId === accountId).map((lease) => this.trimRest(lease));
    return (await Promise.all(trimming)).some(Boolean);
  }

  /** Gives a retired lease's unreserved rest back to the balance now, once; true when that
   * trim was applied (this call's or an earlier one's). */
  trimRest(lease: SpendLease): Promise<boolean> {
    const earlier = this.trims.get(lease);
    if (earlier) return earlier;
    if (lease.trimRest() === 0) return Promise.resolve(false);
    const trim = this.applyTrim(lease).then(
      (outcome) => outcome === 'applied',
      (error: unknown) => {
        // settleOnce applies the same trim again before it captures.
        this.stores.log.warn({ err: error, lease: lease.reference }, 'trimming a spend lease failed; its settlement will try again');
        return false;
      },
    );
    this.trims.set(lease, trim);
    return trim;
  }

  private applyTrim(lease: SpendLease): Promise<LedgerOutcome> {
    return this.stores.ledger.apply({ accountId: lease.accountId, keyId: null, reference: lease.reference, operation: 'trim', amountMicros: lease.trimmedMicros });
  }

  private async settleWithRetries(lease: SpendLease): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.settleOnce(lease);
        return;
      } catch (error) {
        if (attempt >= SETTLE_ATTEMPTS) {
          this.stores.log.error({ err: error, lease: lease.reference }, 'settling a spend lease failed; the sweeper will release its hold when it expires');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
      }
    }
  }

  // Each step is idempotent (deterministic usage ids, one ledger slot per operation), so a retry
  // after a partial failure finishes the job without counting anything twice.
  private async settleOnce(lease: SpendLease): Promise<void> {
    const { ledger, leases, usage, log } = this.stores;
    const statement = lease.statement(new Date());
    await usage.recordMany(statement.usage);
    // The trim goes on the ledger before the settlement that counts on it: applied again here, a
    // trim that failed or is still under way lands now, one already applied moves nothing. A
    // sealed slot ('conflict') means the lease was released as expired: the capture conflicts too.
    const held = lease.trimmedMicros > 0 && (await this.applyTrim(lease)) === 'applied' ? lease.heldMicros : lease.amountMicros;
    const captured = Math.min(statement.spentMicros, held);
    const base = { accountId: lease.accountId, keyId: null, reference: lease.reference };
    const outcome =
      captured === 0
        ? await ledger.apply({ ...base, operation: 'release', amountMicros: held })
        : await ledger.apply({ ...base, operation: 'capture', amountMicros: captured, heldMicros: held });
    if (outcome !== 'applied') log.error({ lease: lease.reference, outcome }, 'a spend lease was already settled elsewhere (the sweeper?); its calls are not charged');
    const overage = statement.spentMicros - captured;
    if (overage > 0 && outcome === 'applied') {
      const debited = await ledger.apply({ ...base, operation: 'debit', amountMicros: overage });
      if (debited !== 'applied') log.warn({ lease: lease.reference, overage }, 'calls cost more than their lease and the balance could not cover the rest');
    }
    await leases.remove(lease.reference);
  }
}
