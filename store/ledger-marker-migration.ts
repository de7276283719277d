import type { Db } from 'mongodb';
import { isDuplicateKey, onlyDuplicateKeys } from './duplicate-keys.ts';

// The ledger finds an applied operation by _id alone, trusting that only an account's head can
// lack its marker (store/ledger.ts). Code from before that rule did not mark the head it built
// on, so a crash between an entry and its marker could leave a gap anywhere in a chain. The
// first process of this version to start marks every entry once, recorded in `migrations`.

const MIGRATION_ID = 'ledger-every-entry-marked';
const BATCH = 1_000;

export async function markEveryLedgerEntry(db: Db): Promise<void> {
  const migrations = db.collection<{ _id: string; at: Date }>('migrations');
  if (await migrations.findOne({ _id: MIGRATION_ID })) return;
  const markers = db.collection<{ _id: string; entry_id: string; operation: string }>('ledger_ops');
  let batch: { _id: string; entry_id: string; operation: string }[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const documents = batch;
    batch = [];
    // Nearly all are marked already: the duplicates say so.
    await markers.insertMany(documents, { ordered: false }).catch((error: unknown) => {
      if (!onlyDuplicateKeys(error)) throw error;
    });
  };
  const entries = db.collection<{ _id: string; op_id: string; operation: string }>('ledger');
  for await (const entry of entries.find({}, { projection: { op_id: 1, operation: 1 } })) {
    batch.push({ _id: entry.op_id, entry_id: entry._id, operation: entry.operation });
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  await migrations.insertOne({ _id: MIGRATION_ID, at: new Date() }).catch((error: unknown) => {
    if (!isDuplicateKey(error)) throw error;
  });
}
