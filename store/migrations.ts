import type { Collection, Db, OptionalUnlessRequiredId } from 'mongodb';
import { isDuplicateKey, onlyDuplicateKeys } from './duplicate-keys.ts';

// Data migrations run at start-up, once per store: each is recorded in `migrations` when done.
// Processes starting together may all run one before either records it, so a migration must be
// harmless to run twice: its writes are inserts, a duplicate key meaning "already there".

const BATCH = 1_000;

/** Runs `work` unless the migration `id` is recorded, then records it. */
export async function migrateOnce(db: Db, id: string, work: () => Promise<void>): Promise<void> {
  const migrations = db.collection<{ _id: string; at: Date }>('migrations');
  if (await migrations.findOne({ _id: id })) return;
  await work();
  // The second of two processes that ran it records it too: its duplicate key says it is done.
  await migrations.insertOne({ _id: id, at: new Date() }).catch((error: unknown) => {
    if (!isDuplicateKey(error)) throw error;
  });
}

/** Inserts every document, a thousand to an insert; one whose _id is already there stays as it is. */
export async function insertMissing<T extends { _id: string }>(into: Collection<T>, documents: AsyncIterable<T>): Promise<void> {
  let batch: T[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const pending = batch;
    batch = [];
    await into.insertMany(pending as OptionalUnlessRequiredId<T>[], { ordered: false }).catch((error: unknown) => {
      if (!onlyDuplicateKeys(error)) throw error;
    });
  };
  for await (const document of documents) {
    batch.push(document);
    if (batch.length >= BATCH) await flush();
  }
  await flush();
}
