import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { BudgetLeaseStore } from '../../../store/budget-leases.ts';
import { capturedFor } from '../../../store/lease-collections.ts';
import type { Ledger, LedgerOutcome } from '../../../store/ledger.ts';
import { withShortfall, type UsageStore } from '../../../store/usage.ts';
import type { JournalWriter } from './journal-writer.ts';
import type { SpendLease } from './spend-lease.ts';

// How a spend lease goes back to the ledger once it takes no more calls (account-budgets.ts
// retires it): it settles when its last call has ended, with its journal first, then the
// capture of what its calls cost (the rest of the hold returns to the balance in the same
// entry) and a debit of any overage beyond it, then its usage records (idempotent ids) of what
// the ledger collected, then its lease document is deleted.
//
// A caller short of money need not wait for the calls still running on a retired lease (a long
// stream, say): the lease trims its unreserved rest back to the balance at once, and its
// settlement later captures from what is left. A trim is one ledger entry in a slot of its own
// (store/ledger.ts), applied at most once however often it is retried.

// A settlement is retried until it lands (the store may be away for minutes), and given up
// only when the process closes: the sweeper then releases the hold, and the calls are lost.
const FIRST_RETRY_DELAY_MS = 400;

export interface RetiredLeaseStores {
  ledger: Ledger;
  leases: BudgetLeaseStore;
  usage: UsageStore;
  log: Pick<FastifyBaseLogger, 'warn' | 'error'>;
  /** Writes a lease's whole statement to its journal (journal-writer.ts). */
  journals?: Pick<JournalWriter, 'writeNow'>;
}

/** Frees the account's money this process holds in other leases, before a lease's calls are
 * debited beyond its hold (account-budgets.ts makeRoom). */
export type MakeRoom = (accountId: string, settling: SpendLease) => Promise<void>;

export class RetiredLeases {
  private readonly retired = new Set<SpendLease>();
  private readonly settlements = new Map<SpendLease, Promise<void>>();
  private readonly trims = new Map<SpendLease, Promise<boolean>>();
  private stopped = false;

  constructor(
    private readonly stores: RetiredLeaseStores,
    /** The longest pause between two settlement attempts. */
    private readonly retryMaxMs = 5_000,
    private readonly makeRoom?: MakeRoom,
  ) {}

  /** Takes a closed lease; it settles at once when no call runs on it. */
  add(lease: SpendLease): void {
    this.retired.add(lease);
    if (lease.isDrained) this.settle(lease);
  }

  /** Settlements that fail from now on are not tried again (the process is closing). */
  stopRetrying(): void {
    this.stopped = true;
  }

  /** The retired leases not settled yet. */
  all(): SpendLease[] {
    return [...this.retired];
  }

  /** Whether `lease` is retired and not settled yet. */
  has(lease: SpendLease): boolean {
    return this.retired.has(lease);
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
        this.stores.log.warn({ ...failureFields(error), lease: lease.reference }, 'trimming a spend lease failed; its settlement will try again');
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
        if (this.stopped) {
          this.stores.log.error({ ...failureFields(error), lease: lease.reference }, 'settling a spend lease failed as the process closes; the sweeper will release its hold');
          return;
        }
        this.stores.log.warn({ ...failureFields(error), lease: lease.reference, attempt }, 'settling a spend lease failed; will retry');
        await new Promise((resolve) => setTimeout(resolve, Math.min(FIRST_RETRY_DELAY_MS * 2 ** (attempt - 1), this.retryMaxMs)));
      }
    }
  }

  // Each step is idempotent (deterministic usage ids, one ledger slot per operation), so a retry
  // after a partial failure finishes the job without counting anything twice.
  private async settleOnce(lease: SpendLease): Promise<void> {
    const { ledger, leases, usage, log } = this.stores;
    const statement = lease.statement(new Date());
    // The journal first, whole: should this process die before its capture (or after it, before
    // its usage records), whoever releases the lease as expired captures and records what the
    // statement says, not what an older journal did.
    await this.stores.journals?.writeNow(lease);
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
    if (outcome === 'insufficient_balance') log.error({ lease: lease.reference }, 'the ledger holds less than a spend lease it granted; its calls are not charged');
    // A lease whose expiry passed (its process could not push it forward in time, or was paused)
    // may have been settled from its journal by whoever released it as expired
    // (store/expired-leases.ts): its hold went back to the balance ('conflict'), or part of it
    // was captured for the calls the journal had, and then this capture reads 'applied' too (the
    // ledger keeps one capture per lease, whatever its amount). So what was captured is read
    // back. The calls were served all the same: the rest of their cost is debited from the
    // balance, as far as it goes.
    const capturedOnLedger = outcome === 'insufficient_balance' || (outcome === 'applied' && captured === 0) ? 0 : await capturedFor(ledger, lease.accountId, lease.reference);
    const settledElsewhere = outcome === 'conflict' || capturedOnLedger !== captured;
    const owed = outcome === 'insufficient_balance' ? 0 : statement.spentMicros - capturedOnLedger;
    let debited = 0;
    if (owed > 0) {
      // The account's money this process holds elsewhere (the lease that replaced this one
      // took the whole free balance, say) goes back first: it was the account's all along.
      if ((await ledger.find(lease.accountId, lease.reference, 'debit')) === null && (await ledger.totals(lease.accountId)).balance_micros < owed) await this.makeRoom?.(lease.accountId, lease);
      // As far as the balance goes: a shortfall forgives only what the balance lacks.
      await ledger.apply({ ...base, operation: 'debit', amountMicros: owed, upToBalance: true });
      debited = (await ledger.find(lease.accountId, lease.reference, 'debit'))?.amount_micros ?? 0;
      if (debited < owed) log.error({ lease: lease.reference, owed, debited, outcome }, "the balance could not cover all that a spend lease's calls cost beyond its hold; the rest is lost");
      else if (settledElsewhere) log.warn({ lease: lease.reference, owed }, 'a spend lease was released as expired before it settled; its calls were debited from the balance');
    }
    // The usage records last, to what the ledger collected for the lease (what went uncollected
    // comes off them), so per-key spend adds up to the ledger's. Written before the capture,
    // records of every call stayed beside a capture of the hold alone when this process died
    // before its capture or its debit of an overage. Nothing moves money after this, so this
    // write is right whenever it lands; a kill before it leaves the lease's document to whoever
    // releases it as expired, who writes them from the journal to the same amount
    // (store/expired-leases.ts). They go over whatever is there: records of an older journal, by
    // whoever released the lease first. (That release also removed the document, so a kill
    // between this debit and this write, a round trip, leaves its records at the capture alone.)
    await usage.replaceMany(withShortfall(statement.usage, statement.spentMicros - capturedOnLedger - debited));
    await leases.remove(lease.reference);
    await leases.journal.remove(lease.reference);
  }
}
