import { MongoBulkWriteError, MongoServerError } from 'mongodb';

// Unique-key inserts are how the store settles races (the one write FerretDB 1.24 keeps atomic,
// and atomic on MongoDB too): a duplicate key is an answer, "someone got there first", not a
// failure.

/** The error is a duplicate key (code 11000). */
export function isDuplicateKey(error: unknown): boolean {
  return error instanceof MongoServerError && error.code === 11000;
}

/** A bulk insert refused only for duplicate keys: every other document went in. */
export function onlyDuplicateKeys(error: unknown): boolean {
  const failures = error instanceof MongoBulkWriteError ? [error.writeErrors].flat() : [];
  return failures.length > 0 && failures.every((failure) => failure.code === 11000);
}

/** Runs an upsert, once more if it met a duplicate key: two first writes of one document at
 * once both try to insert it, and FerretDB refuses the second rather than updating. Written
 * again, it finds the document and updates it. */
export async function upsertOnceMore(write: () => Promise<unknown>): Promise<void> {
  await write().catch((error: unknown) => {
    if (!isDuplicateKey(error)) throw error;
    return write();
  });
}
