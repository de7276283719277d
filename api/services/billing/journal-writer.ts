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
  /** The write under way, for writeNow() to wait for. */
  private pending: Promise<void> = Promise.resolve();

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
    this.writing = true;
    const at = new Date();
    const charges = due.map((lease) => lease.charges);
    const entries = due.map((lease) => {
      const statement = lease.statement(at);
      return { _id: lease.reference, account_id: lease.accountId, spent_micros: statement.spentMicros, usage: statement.usage };
    });
    this.pending = this.journal
      .write(entries)
      .then(
        () => due.forEach((lease, index) => (lease.journaledCharges = Math.max(lease.journaledCharges, charges[index]!))),
        (error: unknown) => this.log.warn(failureFields(error), 'writing the spend lease journals failed; will write them again'),
      )
      .finally(() => (this.writing = false));
  }

  /** Writes `lease`'s whole statement now, after the write under way (one at a time, so an
   * older total never lands over it): a settlement does, before its usage records. Should its
   * process die before the capture, whoever releases the lease as expired charges what those
   * records say, not the journal of a second or more before (a chaos review: usage records of
   * 46 calls, $0.040414, beside a capture of $0.000252). Rejects when the write fails. */
  async writeNow(lease: SpendLease): Promise<void> {
    while (this.writing) await this.pending;
    // Written already as it now stands (or no call charged): nothing to add.
    if (lease.charges <= lease.journaledCharges) return;
    this.writing = true;
    const charges = lease.charges;
    const statement = lease.statement(new Date());
    const write = this.journal.write([{ _id: lease.reference, account_id: lease.accountId, spent_micros: statement.spentMicros, usage: statement.usage }]);
    this.pending = write.then(
      () => undefined,
      () => undefined,
    );
    try {
      await write;
      lease.journaledCharges = Math.max(lease.journaledCharges, charges);
    } finally {
      this.writing = false;
    }
  }
}
