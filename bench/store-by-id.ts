import { rmSync } from 'node:fs';
import path from 'node:path';
import type { Collection } from 'mongodb';
import { projectRoot, provision, startFerretDb } from '../scripts/lib/engines.ts';
import { freePort, type ManagedProcess } from '../scripts/lib/processes.ts';
import { percentile } from './lib/stats.ts';
import { connectDatabase } from '../store/database.ts';

// `npm run bench:store`: what store commands cost as a collection grows, on the indexes the api
// and the worker create. Every write of a task, an Idempotency-Key record or a ledger entry goes
// by _id, most with a guard beside it (store/guarded-writes.ts); the sweeper looks for unstarted
// tasks, the console lists a key's newest, and batched look-ups ask for many _ids. Stock
// FerretDB 1.24 read the whole collection for all of them; the one `npm start` runs carries
// scripts/patches/ferretdb-v1.24.2-indexed-filters.patch, which narrows them in SQL, and a query
// by a field without an index is there to show what is left. `BENCH_FERRETDB=<binary>` runs another
// build (a stock one, to compare: see the patch's header); `MONGODB_URI` a real MongoDB.

const SIZES = (process.env.BENCH_STORE_SIZES || '1000,10000').split(',').map(Number);
const REPEATS = Number(process.env.BENCH_STORE_REPEATS || 50);
const SCAN_REPEATS = 5;

/** A task document shaped like the api's (store/tasks.ts), with a callback and a hold. */
function task(index: number) {
  const created = new Date(Date.UTC(2026, 0, 1) + index * 1_000);
  return {
    _id: `task_${String(index).padStart(8, '0')}`,
    account_id: `acct_${index % 40}`,
    key_id: `key_${index % 120}`,
    model: 'seedance-2.0',
    // One task in a hundred still waits for its workflow's start: what the sweeper looks for.
    status: index % 100 === 0 ? 'submitted' : 'running',
    workflow_started: index % 100 !== 0,
    progress: 10,
    prompt: 'a red fox at dawn, slow dolly shot through long grass, mist in the valley, warm rim light',
    metadata: { resolution: '720p', ratio: '16:9', seed: index, callback_url: 'https://hooks.example.com/framegate/video' },
    price_micros: 400_000,
    hold: { state: 'held', amount_micros: 400_000, op_id: `hold:task_${index}` },
    webhook: { state: 'pending', attempts: [] },
    vendor_task_id: `cgt-${index}-${'0'.repeat(24)}`,
    created_at: created,
    updated_at: created,
  };
}

async function timed(repeats: number, operation: (index: number) => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  for (let index = 0; index < repeats; index++) {
    const start = performance.now();
    await operation(index);
    samples.push(performance.now() - start);
  }
  return { p50: percentile(samples, 0.5), p99: percentile(samples, 0.99) };
}

let ferretdb: ManagedProcess | undefined;
const dataDir = path.join(projectRoot, `.data/bench-store-${process.pid}`);
let uri = process.env.MONGODB_URI;
if (!uri) {
  if (!process.env.BENCH_FERRETDB) provision();
  const port = await freePort();
  ferretdb = await startFerretDb({ port, dataDir, binary: process.env.BENCH_FERRETDB || undefined });
  uri = `mongodb://127.0.0.1:${port}/`;
}
// With the indexes the api and the worker create (store/database.ts).
const { client, db } = await connectDatabase(uri, `bench_store_${process.pid}`);
const store = (await db.admin().command({ buildInfo: 1 })).ferretdbVersion ? `FerretDB (${process.env.BENCH_FERRETDB || 'provisioned, patched'})` : 'MongoDB';
console.log(`bench:store on ${store}: ${REPEATS} commands each, p50 / p99 in ms\n`);
console.log('documents | findOne by _id | updateOne by _id | guarded, holds | guarded, fails | deleteOne by _id, none | find by 100 _ids | findOne by a field without an index, none | one key\'s 20 newest | the sweeper\'s query');
try {
  const tasks: Collection<ReturnType<typeof task>> = db.collection('tasks');
  let inserted = 0;
  for (const size of SIZES) {
    for (; inserted < size; inserted += 500) {
      await tasks.insertMany(Array.from({ length: Math.min(500, size - inserted) }, (_, offset) => task(inserted + offset)));
    }
    inserted = size;
    const id = (index: number) => task((index * 7919) % size)._id;
    const figures = [
      await timed(REPEATS, (index) => tasks.findOne({ _id: id(index) })),
      await timed(REPEATS, (index) => tasks.updateOne({ _id: id(index) }, { $set: { updated_at: new Date() } })),
      await timed(REPEATS, (index) => tasks.updateOne({ _id: id(index), status: { $in: ['submitted', 'running'] } }, { $max: { progress: 10 + index }, $set: { updated_at: new Date() } })),
      await timed(REPEATS, (index) => tasks.updateOne({ _id: id(index), status: 'succeeded' }, { $set: { updated_at: new Date() } })),
      await timed(REPEATS, (index) => tasks.deleteOne({ _id: `task_missing_${index}` })),
      await timed(REPEATS, (index) => tasks.find({ _id: { $in: Array.from({ length: 100 }, (_, offset) => id(index * 100 + offset)) } }).toArray()),
      await timed(SCAN_REPEATS, (index) => tasks.findOne({ vendor_task_id: `cgt-missing-${index}` })),
      await timed(SCAN_REPEATS, (index) => tasks.find({ account_id: `acct_${index % 40}`, key_id: `key_${index % 120}` }).sort({ created_at: -1, _id: -1 }).limit(21).toArray()),
      await timed(SCAN_REPEATS, () => tasks.find({ workflow_started: false, status: 'submitted', created_at: { $lt: new Date() } }, { projection: { _id: 1 } }).toArray()),
    ];
    const cell = ({ p50, p99 }: { p50: number; p99: number }) => `${p50.toFixed(2)} / ${p99.toFixed(2)}`;
    console.log(`${String(size).padStart(9)} | ${figures.map(cell).join(' | ')}`);
    const scanOverGuarded = figures[6]!.p50 / figures[2]!.p50;
    console.log(`          the query by a field without an index takes ${scanOverGuarded.toFixed(0)}× a guarded update's p50`);
  }
} finally {
  await db.dropDatabase().catch(() => undefined);
  await client.close();
  if (ferretdb) {
    await ferretdb.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
