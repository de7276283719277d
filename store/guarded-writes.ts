import type { Collection, Filter, UpdateFilter } from 'mongodb';

// A write to one document, by _id, that is wanted only while the document still reads as
// expected (a task still running, its progress still lower), and optionally only while the
// caller still may (`inTime`, asked just before the write: an Idempotency-Key turn still ours).
//
// The guard goes into the write's filter beside _id: one command, served by the _id index. On
// MongoDB that command is atomic. On FerretDB it reads the document by _id, checks the filter
// and writes the whole document back by _id, so two writes can both pass one guard: what
// retries race for is decided by a unique insert first (store/idempotency-turns.ts).
//
// Stock FerretDB 1.24 used no index for such a filter and decoded the whole collection in Go
// (0.47 s a write at 10,000 tasks, 0.96 s when the guard fails: `npm run bench:store`); the
// FerretDB the project builds carries a patch that makes it go by the _id index, 1 ms
// (scripts/patches/ferretdb-v1.24.2-indexed-filters.patch, README "Development").

/** A guard: fields (dotted paths allowed) and what each must match, as in a filter. */
export type Guard = Record<string, unknown>;

const always = () => true;

/** Applies `update` to the document `id` if it meets `guard` (and `inTime()` says it may still
 * be made); true when it changed it. */
export async function guardedUpdate<T extends { _id: string }>(collection: Collection<T>, id: string, guard: Guard, update: UpdateFilter<T>, inTime: () => boolean = always): Promise<boolean> {
  return inTime() && (await collection.updateOne(filterFor<T>(id, guard), update)).modifiedCount === 1;
}

/** Deletes the document `id` if it meets `guard` (and `inTime()`); true when it deleted it. */
export async function guardedDelete<T extends { _id: string }>(collection: Collection<T>, id: string, guard: Guard, inTime: () => boolean = always): Promise<boolean> {
  return inTime() && (await collection.deleteOne(filterFor<T>(id, guard))).deletedCount === 1;
}

function filterFor<T extends { _id: string }>(id: string, guard: Guard): Filter<T> {
  return { ...guard, _id: id } as Filter<T>;
}
