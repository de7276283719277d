import type { FastifyBaseLogger } from 'fastify';
import { failureFields } from '../../../core/dependency-errors.ts';
import type { LeaseRecall, RecallAsk } from './lease-recall.ts';
import type { RetiredLeases } from './retired-leases.ts';
import type { SharedAccounts } from './shared-accounts.ts';
import type { SpendLease } from './spend-lease.ts';

// This process's side of an ask (lease-recall.ts): on each tick of account-budgets.ts, look for
// asks on its leases, retire an asked open lease, and give back what running calls do not
// reserve of it.

export interface RecallAnswerHost {
  recall: LeaseRecall;
  retired: RetiredLeases;
  shared: SharedAccounts;
  log: Pick<FastifyBaseLogger, 'warn'>;
  /** The open leases, by account. */
  active: ReadonlyMap<string, SpendLease>;
  retire(lease: SpendLease): void;
}

/** Retires the open leases another process asked back, and trims those that calls still run
 * on, retired before or just now. */
export function answerRecalls(host: RecallAnswerHost, now: number): void {
  const untrimmed = host.retired.all().filter((lease) => !lease.isDrained && lease.trimmedMicros === 0);
  const candidates = [...host.active.values(), ...untrimmed];
  const shared = candidates.some((lease) => host.shared.has(lease.accountId, now));
  host.recall.recalledAmong(candidates.map((lease) => lease.reference), now, shared).then(
    (recalled) => {
      for (const lease of candidates) {
        const ask = recalled?.find((ask) => ask.reference === lease.reference);
        if (!ask) continue;
        host.shared.mark(lease.accountId);
        if (host.active.get(lease.accountId) === lease) host.retire(lease);
        // A drained lease answers by settling (its document goes); one that calls still run
        // on trims its rest, on every look while it has none (a call ending frees some), and
        // says it answered once the trim landed or there was nothing to trim.
        if (!lease.isDrained) void trimAsked(host, lease, ask);
      }
    },
    (error: unknown) => host.log.warn(failureFields(error), 'looking for recalled spend leases failed; will look again'),
  );
}

async function trimAsked(host: RecallAnswerHost, lease: SpendLease, ask: RecallAsk): Promise<void> {
  const trimmed = await host.retired.trimRest(lease);
  // A trim that failed is applied again by the settlement: the asker waits for it meanwhile.
  if (ask.answered || (!trimmed && lease.trimmedMicros > 0)) return;
  await host.recall.answered(lease.reference, ask.recalledAt).catch((error: unknown) => host.log.warn({ ...failureFields(error), lease: lease.reference }, 'answering a recall failed; the asker waits for the trim or its own deadline'));
}
