import type { Db } from 'mongodb';
import { insertMissing, migrateOnce } from './migrations.ts';

// The ledger finds an applied operation by _id alone, trusting that only an account's head can
// lack its marker (store/ledger.ts). Code from before that rule did not mark the head it built
// on, so a crash between an entry and its marker could leave a gap anywhere in a chain. The
// first process of this version to start marks every entry once (nearly all are marked
// already: their inserts are duplicates).

export async function markEveryLedgerEntry(db: Db): Promise<void> {
  await migrateOnce(db, 'ledger-every-entry-marked', async () => {
    const entries = db.collection<{ _id: string; op_id: string; operation: string }>('ledger');
    const markers = db.collection<{ _id: string; entry_id: string; operation: string }>('ledger_ops');
    async function* markersOfEntries() {
      for await (const entry of entries.find({}, { projection: { op_id: 1, operation: 1 } })) {
        yield { _id: entry.op_id, entry_id: entry._id, operation: entry.operation };
      }
    }
    await insertMissing(markers, markersOfEntries());
  });
}
