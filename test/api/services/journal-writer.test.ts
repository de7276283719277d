import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JournalWriter } from '../../../api/services/billing/journal-writer.ts';
import { SpendLease } from '../../../api/services/billing/spend-lease.ts';
import type { LeaseJournal } from '../../../store/lease-journal.ts';
import { chatCall, silent } from '../../helpers/budget-stores.ts';

// The lease journals' writes (api/services/billing/journal-writer.ts): one at a time, so an
// older total never lands over a newer one, and the settlements' own writes of a busy process
// share round trips instead of queueing one behind another (a diff review measured 200
// settlements taking 200 serial writes).

/** A journal whose writes take `ms` each, recording what each wrote and whether two overlapped. */
function slowJournal(ms: number) {
  const writes: string[][] = [];
  let inFlight = 0;
  let overlapped = false;
  const journal = {
    async write(entries: Array<{ _id: string }>) {
      inFlight++;
      overlapped ||= inFlight > 1;
      await new Promise((resolve) => setTimeout(resolve, ms));
      writes.push(entries.map((entry) => entry._id));
      inFlight--;
    },
  };
  return { journal: journal as unknown as LeaseJournal, writes, overlapped: () => overlapped };
}

/** A lease with one call charged. */
function chargedLease(reference: string): SpendLease {
  const lease = new SpendLease(reference, 'acct_journal', 1_000_000, Date.now(), Date.now() + 60_000, 60_000);
  lease.reserve(10_000, chatCall, Date.now()).charge(2_000, { outputTokens: 1 }, { allowOverage: false });
  return lease;
}

describe('the lease journal writer', () => {
  it("writes many settlements' statements in a few round trips, never two at once, after the tick's write", async () => {
    const { journal, writes, overlapped } = slowJournal(20);
    const writer = new JournalWriter(journal, 1_000, silent);
    const ticked = chargedLease('lease_ticked');
    writer.tick(Date.now(), [ticked]);
    const settling = Array.from({ length: 50 }, (_, index) => chargedLease(`lease_settling_${index}`));
    await Promise.all(settling.map((lease) => writer.writeNow(lease)));
    assert.equal(overlapped(), false, 'one write at a time');
    assert.deepEqual(writes[0], ['lease_ticked'], "the tick's write first");
    assert.equal(writes.length, 2, `50 statements in ${writes.length - 1} writes`);
    assert.equal(writes[1]!.length, 50);
    assert.ok(settling.every((lease) => lease.journaledCharges === lease.charges));
    // Written already as they stand: nothing more to write.
    await writer.writeNow(settling[0]!);
    assert.equal(writes.length, 2);
  });

  it('rejects a settlement whose write failed, and writes it again when asked', async () => {
    let failing = true;
    const written: string[] = [];
    const journal = {
      async write(entries: Array<{ _id: string }>) {
        if (failing) throw new Error('store unreachable');
        written.push(...entries.map((entry) => entry._id));
      },
    } as unknown as LeaseJournal;
    const writer = new JournalWriter(journal, 1_000, silent);
    const lease = chargedLease('lease_retried');
    await assert.rejects(writer.writeNow(lease), /store unreachable/);
    assert.equal(lease.journaledCharges, 0);
    failing = false;
    await writer.writeNow(lease);
    assert.deepEqual(written, ['lease_retried']);
  });
});
