import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ObjectId, type Collection, type Document, type Filter } from 'mongodb';
import { testDatabase } from '../helpers/engines.ts';

// Queries the store narrows by an index before it reads any document. Stock FerretDB 1.24 did
// that only for a filter that was one _id equality: every other query decoded the whole
// collection in Go (a second at 10,000 tasks, `npm run bench:store`). The FerretDB `npm test`
// and `npm start` build carries scripts/patches/ferretdb-v1.24.2-indexed-filters.patch, which
// narrows by top-level string and boolean equalities and `$in` lists too. A narrowing that
// left out a document the filter matches would lose tasks and keys without a sign, so the
// first test compares every narrowed query with the same filter under `$and`, which FerretDB
// never narrows.

/** Values of the field the filters ask about, of every type a document may hold there
 * (FerretDB refuses arrays of arrays). */
const STRINGS = ['', 'x', 'X', 'x ', 'é', 'e\u0301', '😀', '<a&b>', 'say "hi"', 'back\\slash', 'line\nbreak', '\u2028', '\u0001', '["x"]', '"x"', 'true', '1', '[', 'acct_1', 'acct_10'];
const OTHERS: unknown[] = [1, 1.5, 0, -1, true, false, null, ['x'], ['x', 'y'], [], [1, 'x'], [true], [false, 'x'], [{ a: 'x' }], ['<a&b>'], { a: 'x' }, { x: 'x' }, {}, new ObjectId('0123456789abcdef01234567'), new Date(0)];

interface Doc {
  _id: string;
  f?: unknown;
  g?: unknown;
  mark?: number;
}

function documents(): Doc[] {
  const values = [...STRINGS, ...OTHERS];
  const docs: Doc[] = values.map((value, index) => ({ _id: `d${index}`, f: value, g: index % 2 === 0 ? true : 'on' }));
  docs.push({ _id: 'no_f', g: true });
  return docs;
}

function filters(): Filter<Doc>[] {
  return [
    ...[...STRINGS, 'absent'].map((value) => ({ f: value })),
    { f: true },
    { f: false },
    { f: { $in: ['x', 'y'] } },
    { f: { $in: ['<a&b>', 'say "hi"', '😀'] } },
    { f: { $in: ['absent'] } },
    { f: 'x', g: true },
    { f: { $in: ['x', 'é'] }, g: 'on' },
    { g: true },
    { _id: 'd3' },
    { _id: 'd3', f: 'x ' },
    { _id: 'd3', f: 'x' },
    { _id: { $in: ['d1', 'd5', 'no_f', 'missing'] } },
    { _id: { $in: ['d1', 'd5'] }, f: { $in: ['x', 'é'] } },
    { _id: { $in: ['missing'] } },
    // Past the bounds that keep a statement inside SQLite's limits (a fuzzing review found
    // these failing with "Expression tree is too large"): the rest is checked in Go.
    { f: { $in: [...Array.from({ length: 998 }, (_, index) => `v${index}`), 'x'] } },
    Object.fromEntries([['f', 'x'], ...Array.from({ length: 520 }, (_, index) => [`k${index}`, { $in: ['a', 'b'] }])]) as Filter<Doc>,
    Object.fromEntries([['g', true], ...Array.from({ length: 520 }, (_, index) => [`k${index}`, 'absent'])]) as Filter<Doc>,
  ];
}

const ids = (docs: Doc[]) => docs.map((doc) => doc._id).sort();

describe('filters the store narrows by an index', () => {
  let shared: Awaited<ReturnType<typeof testDatabase>>;
  let ferretDb: boolean;
  before(async () => {
    shared = await testDatabase('indexed_filters');
    ferretDb = typeof (await shared.db.admin().command({ buildInfo: 1 })).ferretdbVersion === 'string';
  });
  after(async () => {
    await shared.drop();
  });

  it('find, count and update exactly what the same filter finds when nothing is narrowed', async () => {
    const plain = shared.db.collection<Doc>('plain');
    const indexed = shared.db.collection<Doc>('indexed');
    await indexed.createIndex({ f: 1 });
    await indexed.createIndex({ g: 1, f: 1 });
    let mark = 0;
    for (const collection of [plain, indexed]) {
      await collection.insertMany(documents());
      for (const filter of filters()) {
        const label = `${collection.collectionName} ${JSON.stringify(filter)}`;
        const expected = ids(await collection.find({ $and: [filter] }).toArray());
        assert.deepEqual(ids(await collection.find(filter).toArray()), expected, label);
        assert.equal(await collection.countDocuments(filter), expected.length, label);
        mark++;
        assert.equal((await collection.updateMany(filter, { $set: { mark } })).modifiedCount, expected.length, label);
        assert.deepEqual(ids(await collection.find({ mark }).toArray()), expected, label);
      }
    }
    // The comparison has teeth: the filters do match documents of every kind, arrays included.
    assert.deepEqual(ids(await plain.find({ f: 'x' }).toArray()), ['d1', 'd27', 'd28', 'd30', 'd32'].sort());
  });

  /** How the store plans `filter` on `collection`, flattened to one string. */
  async function planOf(collection: Collection<Document>, filter: Document): Promise<string> {
    const explained = await collection.find(filter).explain();
    return JSON.stringify(explained.queryPlanner ?? explained);
  }

  it("plans the sweeper's query, a key's page of tasks and a look-up of many ids by the indexes the store creates", async () => {
    // The indexes are those store/database.ts creates; the filters have the shapes of
    // TaskStore.findUnstarted and listLatest, and of the batched look-ups by _id.
    const tasks = shared.db.collection('tasks');
    await tasks.insertMany(Array.from({ length: 60 }, (_, index) => ({ _id: `task_${index}` as unknown as Document['_id'], account_id: `acct_${index % 3}`, key_id: `key_${index % 6}`, status: index % 10 ? 'succeeded' : 'submitted', workflow_started: index % 10 !== 0, created_at: new Date(index * 1000) })));
    const unstarted = { workflow_started: false, status: 'submitted', created_at: { $lt: new Date() } };
    const keyPage = { account_id: 'acct_1', key_id: 'key_1' };
    const manyIds = { _id: { $in: ['task_1', 'task_2', 'task_40'] } };
    assert.deepEqual((await tasks.find(unstarted).toArray()).map((task) => task._id).sort(), ['task_0', 'task_10', 'task_20', 'task_30', 'task_40', 'task_50']);
    const plans = { unstarted: await planOf(tasks, unstarted), keyPage: await planOf(tasks, keyPage), manyIds: await planOf(tasks, manyIds) };
    if (ferretDb) {
      // SQLite's own plan: "SCAN <table>" reads every row, "SEARCH <table> USING INDEX <name>"
      // goes by an index.
      assert.match(plans.unstarted, /USING INDEX \S+_by_start_state /, plans.unstarted);
      assert.match(plans.keyPage, /USING INDEX \S+_by_account_page /, plans.keyPage);
      assert.match(plans.manyIds, /USING INDEX \S+__id_ /, plans.manyIds);
      for (const plan of Object.values(plans)) assert.doesNotMatch(plan, /detail=SCAN /, plan);
    } else {
      for (const plan of Object.values(plans)) {
        assert.match(plan, /IXSCAN|IDHACK/, plan);
        assert.doesNotMatch(plan, /COLLSCAN/, plan);
      }
    }
  });
});
