import { failureFields } from '../../../core/dependency-errors.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { LeaseJournal } from '../../../store/lease-journal.ts';
import type { SpendLease } from './spend-lease.ts';

// Keeps the spend leases' journals (store/lease-journal.ts) current: about once every
// `intervalMs`, what the calls of each lease charged since its last write have cost so far,
// for all such leases in one round trip, and nothing while no call is charged. A write that
// fails is made again at the next interval.

export class JournalWriter {
  private nextAt = 0;
  private writing = false;
  /** Settles once the write under way (if any) is over and `writing` is false again. */
  private pending: Promise<void> = Promise.resolve();
  /** The leases writeNow() was asked for since the last batch started, and that batch's write. */
  private requested: { leases: Set<SpendLease>; written: Promise<void> } | undefined;

  constructor(
    private readonly journal: LeaseJournal,
    private readonly intervalMs: number,
    private readonly log: Pick<FastifyBaseLogger, 'warn'>,
  ) {}

  /** Called on every tick of the leases' timer with this process's open and settling leases. */
  tick(now: number, leases: SpendLease[]): void {
    if (this.writing || now < this.nextAt) return;
    const due = leases.filter((lease) => lease.charges > lease.journaledCharges);
    if (due.length === 0) return;
    this.nextAt = now + this.intervalMs;
    this.write(due).catch((error: unknown) => this.log.warn(failureFields(error), 'writing the spend lease journals failed; will write them again'));
  }

  /** Writes `lease`'s whole statement soon, one write at a time (so an older total never lands
   * over it), with every other lease asked for meanwhile in the same round trip: a settlement
   * does, before it moves any money. Should its process die before its capture, whoever
   * releases the lease as expired charges its whole statement, not the journal of a second or
   * more before (a chaos review: usage records of 46 calls, $0.040414, beside a capture of
   * $0.000252). Rejects when the write fails. */
  writeNow(lease: SpendLease): Promise<void> {
    // Written already as it now stands (or no call charged): nothing to add.
    if (lease.charges <= lease.journaledCharges) return Promise.resolve();
    this.requested ??= { leases: new Set(), written: this.nextBatch() };
    this.requested.leases.add(lease);
    return this.requested.written;
  }

  private async nextBatch(): Promise<void> {
    do await this.pending;
    while (this.writing);
    const batch = this.requested!;
    this.requested = undefined;
    const leases = [...batch.leases].filter((lease) => lease.charges > lease.journaledCharges);
    if (leases.length > 0) await this.write(leases);
  }

  /** One round trip for the leases' statements as they now stand. */
  private write(leases: SpendLease[]): Promise<void> {
    this.writing = true;
    const at = new Date();
    const charges = leases.map((lease) => lease.charges);
    const entries = leases.map((lease) => {
      const statement = lease.statement(at);
      return { _id: lease.reference, account_id: lease.accountId, spent_micros: statement.spentMicros, usage: statement.usage };
    });
    const written = this.journal.write(entries).then(() => leases.forEach((lease, index) => (lease.journaledCharges = Math.max(lease.journaledCharges, charges[index]!))));
    const over = () => {
      this.writing = false;
    };
    this.pending = written.then(over, over);
    return written;
  }
}
