import { rmSync } from 'node:fs';
import path from 'node:path';
import { MongoClient, type Collection } from 'mongodb';
import { projectRoot, provision, startFerretDb } from '../scripts/lib/engines.ts';
import { freePort, type ManagedProcess } from '../scripts/lib/processes.ts';
import { percentile } from './lib/stats.ts';

// `npm run bench:store`: what one store command addressed by _id costs as a collection grows,
// beside a query by another field (which reads every document on FerretDB). Every write of a
// task, an Idempotency-Key record or a ledger entry goes by _id, most with a guard beside it
// (store/guarded-writes.ts), so these figures are what a large local store costs the video
// path. Stock FerretDB 1.24 scanned for all of them; the one `npm start` runs carries
// scripts/patches/ferretdb-v1.24.2-id-index.patch. `BENCH_FERRETDB=<binary>` runs another
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
    status: 'running',
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
const client = await MongoClient.connect(uri);
const db = client.db(`bench_store_${process.pid}`);
const store = (await db.admin().command({ buildInfo: 1 })).ferretdbVersion ? `FerretDB (${process.env.BENCH_FERRETDB || 'provisioned, patched'})` : 'MongoDB';
console.log(`bench:store on ${store}: ${REPEATS} commands each, p50 / p99 in ms\n`);
console.log('documents | findOne by _id | updateOne by _id | guarded, holds | guarded, fails | deleteOne by _id, none | findOne by another field');
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
      await timed(SCAN_REPEATS, (index) => tasks.findOne({ vendor_task_id: `cgt-missing-${index}` })),
    ];
    const cell = ({ p50, p99 }: { p50: number; p99: number }) => `${p50.toFixed(2)} / ${p99.toFixed(2)}`;
    console.log(`${String(size).padStart(9)} | ${figures.map(cell).join(' | ')}`);
    const scanOverGuarded = figures[5]!.p50 / figures[2]!.p50;
    console.log(`          the query by another field takes ${scanOverGuarded.toFixed(0)}× a guarded update's p50`);
  }
} finally {
  await db.dropDatabase().catch(() => undefined);
  await client.close();
  if (ferretdb) {
    await ferretdb.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
