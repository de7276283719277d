import type { FastifyBaseLogger } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import { microsToUsd } from '../../../core/money.ts';
import type { AccountStore } from '../../../store/accounts.ts';
import type { Ledger } from '../../../store/ledger.ts';
import type { UsageStore } from '../../../store/usage.ts';
import type { Principal } from '../../plugins/api-key-auth.ts';

// The money side of one proxied call: hold the worst case before the upstream is asked, then
// settle exactly once, either capturing the real price (the rest of the hold returns to the
// balance in the same ledger entry) or releasing all of it. Capture and release share one
// ledger slot, so a second settlement can never move money again.
//
// Settling runs after the upstream already did the work, often after the caller already has
// (part of) the answer, so its failures are logged instead of thrown: the hold then stays on
// the account as a pending entry under a deterministic id, visible to an operator.

export interface BillingStores {
  ledger: Ledger;
  usage: UsageStore;
  accounts: AccountStore;
}

/** Settlements that run after the caller already has its answer, so shutdown can wait for them. */
export class PendingSettlements {
  private readonly pending = new Set<Promise<unknown>>();

  track(settlement: Promise<unknown>): void {
    this.pending.add(settlement);
    void settlement.finally(() => this.pending.delete(settlement));
  }

  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}

export interface UsageFigures {
  inputTokens?: number;
  outputTokens?: number;
  images?: number;
}

export interface ChargeDescription {
  principal: Principal;
  /** Unique per call; names the ledger entries and the usage record. */
  reference: string;
  modelId: string;
  kind: 'chat' | 'image';
}

export class Charge {
  private settled = false;

  private constructor(
    private readonly stores: BillingStores,
    private readonly description: ChargeDescription,
    readonly heldMicros: number,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** Holds `amountMicros` on the key's account; 403 insufficient_balance when it does not cover it. */
  static async hold(stores: BillingStores, description: ChargeDescription, amountMicros: number, log: FastifyBaseLogger): Promise<Charge> {
    const { principal, reference } = description;
    const outcome = await stores.ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference, operation: 'hold', amountMicros });
    if (outcome !== 'applied') {
      const account = await stores.accounts.find(principal.accountId);
      throw new GatewayError(
        'insufficient_balance',
        `Insufficient balance: this request may cost up to $${microsToUsd(amountMicros).toFixed(6)} and the account has $${microsToUsd(account?.balance_micros ?? 0).toFixed(6)} available. Add credits, or lower max_tokens, and retry.`,
      );
    }
    return new Charge(stores, description, amountMicros, log);
  }

  get isSettled(): boolean {
    return this.settled;
  }

  /**
   * Charges `priceMicros`. Up to the hold is captured from it; with `allowOverage`, a price above
   * the hold (the estimate was too low) is debited from the balance as far as it goes. Returns
   * what was charged.
   */
  async capture(priceMicros: number, figures: UsageFigures, options: { allowOverage: boolean }): Promise<number> {
    if (this.settled) return 0;
    this.settled = true;
    const { principal, reference, modelId, kind } = this.description;
    const captured = Math.min(priceMicros, this.heldMicros);
    let charged = captured;
    try {
      await this.stores.ledger.apply({
        accountId: principal.accountId,
        keyId: principal.keyId,
        reference,
        operation: 'capture',
        amountMicros: captured,
        heldMicros: this.heldMicros,
      });
      const overage = priceMicros - captured;
      if (options.allowOverage && overage > 0) {
        const debited = await this.stores.ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference, operation: 'debit', amountMicros: overage });
        if (debited === 'applied') charged += overage;
        else this.log.warn({ reference, overage }, 'the price exceeded the hold and the balance could not cover the rest');
      }
      await this.stores.usage.record({
        _id: `${reference}:usage`,
        account_id: principal.accountId,
        key_id: principal.keyId,
        model: modelId,
        kind,
        requests: 1,
        video_seconds: 0,
        input_tokens: figures.inputTokens ?? 0,
        output_tokens: figures.outputTokens ?? 0,
        images: figures.images ?? 0,
        spend_micros: charged,
      });
    } catch (error) {
      this.log.error({ err: error, reference, priceMicros }, 'settling a capture failed; the hold stays pending');
    }
    return charged;
  }

  /** Returns the whole hold to the balance. */
  async release(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    const { principal, reference } = this.description;
    try {
      await this.stores.ledger.apply({ accountId: principal.accountId, keyId: principal.keyId, reference, operation: 'release', amountMicros: this.heldMicros });
    } catch (error) {
      this.log.error({ err: error, reference }, 'releasing a hold failed; it stays pending');
    }
  }
}
