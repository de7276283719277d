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
    this.journal
      .write(entries)
      .then(
        () => due.forEach((lease, index) => (lease.journaledCharges = Math.max(lease.journaledCharges, charges[index]!))),
        (error: unknown) => this.log.warn(failureFields(error), 'writing the spend lease journals failed; will write them again'),
      )
      .finally(() => (this.writing = false));
  }
}
