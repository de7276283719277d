import type { Collection, Db, Document, Filter, UpdateFilter } from 'mongodb';

// A write to one document, by _id, that is wanted only while the document still reads as
// expected (a task still running, its progress still lower).
//
// On MongoDB the guard goes into the write's filter: one atomic command, served by the _id
// index. FerretDB 1.24 (SQLite) pushes a filter down only when it is `_id` alone; with a guard
// beside it, it reads and decodes the collection in Go until it meets the document, and all of
// it when the guard does not hold. Measured on 15,000 documents: 0.4 s a write for a recent
// document or a guard that fails, against 0.04 to 0.08 s by _id alone, and 1.7 ms for a
// findOne by _id. There the document is read by _id, the guard checked here, and the write
// made by _id alone; a write whose guard fails costs a read only.
//
// That puts a round trip between the check and the write, where FerretDB's own guarded write
// has only the time inside its command (it too matches on a read and writes by _id after it):
// only for writes whose guard may go stale harmlessly. Not for a state that another writer may
// be moving at the same moment (a task's status, an Idempotency-Key claim): those keep their
// guard in the filter (store/tasks.ts), and what retries race for is decided by a unique insert
// (store/idempotency-turns.ts).

/** A guard: fields (dotted paths allowed) and the value each must equal, or `{$in: [...]}`,
 * or `{$lt: value}`. */
export type Guard = Record<string, unknown>;

const ferretDbs = new WeakMap<Db, Promise<boolean>>();
const always = () => true;

/** Whether the store behind `db` is FerretDB (its buildInfo says so), asked once per Db. */
function isFerretDb(db: Db): Promise<boolean> {
  let known = ferretDbs.get(db);
  if (!known) {
    known = db
      .admin()
      .command({ buildInfo: 1 })
      .then((info) => typeof info.ferretdbVersion === 'string');
    // A store that could not answer is asked again by the next write.
    known.catch(() => ferretDbs.delete(db));
    ferretDbs.set(db, known);
  }
  return known;
}

function valueAt(document: Document, path: string): unknown {
  let value: unknown = document;
  for (const part of path.split('.')) value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
  return value;
}

function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return a === b;
}

/** Whether the document meets the guard, as the store would judge the same filter. */
export function meetsGuard(document: Document, guard: Guard): boolean {
  return Object.entries(guard).every(([path, expected]) => {
    const actual = valueAt(document, path);
    if (expected !== null && typeof expected === 'object' && !(expected instanceof Date)) {
      const operators = Object.entries(expected);
      return operators.every(([operator, operand]) => {
        if (operator === '$in') return (operand as unknown[]).some((candidate) => same(actual, candidate));
        if (operator === '$lt') return typeof actual === typeof operand && (actual as number) < (operand as number);
        throw new Error(`guarded writes do not know ${operator}`);
      });
    }
    return same(actual, expected);
  });
}

export class GuardedWrites {
  /** `store` names the store's kind instead of asking it (tests take both ways on one store). */
  constructor(
    private readonly db: Db,
    private readonly store?: 'ferretdb' | 'mongodb',
  ) {}

  /** Applies `update` to the document `id` if it meets `guard` (and `inTime()`, asked just
   * before the write, says it may still be made); true when it changed it. */
  async updateOne<T extends { _id: string }>(collection: Collection<T>, id: string, guard: Guard, update: UpdateFilter<T>, inTime: () => boolean = always): Promise<boolean> {
    const filter = await this.filterFor(collection, id, guard);
    return filter !== null && inTime() && (await collection.updateOne(filter, update)).modifiedCount === 1;
  }

  /** Deletes the document `id` if it meets `guard` (and `inTime()`); true when it deleted it. */
  async deleteOne<T extends { _id: string }>(collection: Collection<T>, id: string, guard: Guard, inTime: () => boolean = always): Promise<boolean> {
    const filter = await this.filterFor(collection, id, guard);
    return filter !== null && inTime() && (await collection.deleteOne(filter)).deletedCount === 1;
  }

  /** The write's filter, or null when the guard was found not to hold (nothing to write). */
  private async filterFor<T extends { _id: string }>(collection: Collection<T>, id: string, guard: Guard): Promise<Filter<T> | null> {
    const byId = { _id: id } as Filter<T>;
    const ferretDb = this.store === undefined ? await isFerretDb(this.db) : this.store === 'ferretdb';
    if (!ferretDb) return { ...byId, ...guard } as Filter<T>;
    const document = await collection.findOne(byId);
    return document && meetsGuard(document, guard) ? byId : null;
  }
}
