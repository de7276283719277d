import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, provision, startFerretDb, startTemporalDevServer } from '../scripts/lib/engines.ts';
import { freePort, type ManagedProcess } from '../scripts/lib/processes.ts';
import { connectDatabase } from '../store/database.ts';
import { printChatReport } from './lib/chat-report.ts';
import { framegateAccounts, startFloor, startFramegate, startLiteLlm, startUpstream, type Launch } from './lib/chat-targets.ts';
import { inTurns, measureLatency, measureStreams, measureThroughput, mergeStreamBlocks, pooled, rotate, STREAM_CONCURRENCY, THROUGHPUT_CONCURRENCY, warmUp } from './lib/chat-sections.ts';
import { complete, mergeLoads, streamCapacity, type ChatTarget, type StreamCapacity } from './lib/proxy-load.ts';

// `node --import tsx bench/chat-proxy.ts`: the chat proxy's cost, side by side in one run:
//   direct   the loopback upstream itself (bench/lib/loopback-upstream.ts, its own process);
//   node floor bench/lib/bare-node-proxy.ts: node:http + undici, no framework: what one more
//            loopback hop costs in Node at all;
//   floor    bench/lib/bare-proxy.ts: bare Fastify + undici forwarding the body, nothing else:
//            what Node and the stack cost before Framegate adds anything;
//   Framegate api/server.ts built (npm run build), in its own process, on FerretDB and Temporal,
//            with a funded account and key, its catalog's OpenAI upstream pointed at the same
//            loopback upstream;
//   LiteLLM  the LiteLLM proxy (pinned, installed by scripts/provision-bench.sh into
//            .tools/bench-venv), no database, model openai/gpt-4o-mini at the same upstream.
// 1. added latency p50/p99 at concurrency 1, zero-delay upstream, non-stream; then the same
//    for calls that each follow a pause (BENCH_PAUSE_MS), as an agent's or a person's do;
// 2. throughput at 50 concurrent connections, upstream answering after 20 ms, and the CPU time
//    each target's own process spends per call;
// 3. streaming (64 chunks 20 ms apart): added time-to-first-token p50/p99 and inter-chunk gap;
// 4. the most concurrent streams held with no lost chunk (levels from BENCH_CAPACITY_LEVELS).
// Every loop is bounded in count and time; all traffic stays on 127.0.0.1. Figures only,
// nothing asserted (machines are noisy). BENCH_* variables below scale the runs.
// Every process under test writes its output to a file (lib/chat-targets.ts), not to a pipe this process
// reads: reading Framegate's log lines here cost the load generator CPU and, once the pipe was
// full, stalled Framegate's synchronous log writes, which showed up as Framegate's own cost.

// 10,000 samples put the p99 on the 100th slowest call: with 2,000 (the 20th slowest) two runs
// of the same code on one day read +3.70 and +4.26 ms added p99. 3,000 throughput
// requests used to end a direct run in 1.4 s, too short to be steady: runs are now bound by
// time (15 s) for every target but LiteLLM's slowest.
const LATENCY_REQUESTS = Number(process.env.BENCH_LATENCY_REQUESTS || 10_000);
const THROUGHPUT_REQUESTS = Number(process.env.BENCH_THROUGHPUT_REQUESTS || 40_000);
const THROUGHPUT_SECONDS = Number(process.env.BENCH_THROUGHPUT_SECONDS || 15);
const PAUSED_CALLS = Number(process.env.BENCH_PAUSED_CALLS || 15);
// Longer than an idle spend lease of a large share of the balance is kept (SPEND_LEASE_IDLE_MS)
// and than a key read is good for without the change feed (KEY_CACHE_MS).
const PAUSE_MS = Number(process.env.BENCH_PAUSE_MS || 6_000);
// A p99 needs 100 samples to be more than the slowest one: with 16 streams the TTFT "p99" was
// simply the slowest stream, with 100 the second slowest. 200 streams, 4 at a time, take about
// 65 s per target.
const STREAMS = Number(process.env.BENCH_STREAMS || 200);
const CAPACITY_LEVELS = (process.env.BENCH_CAPACITY_LEVELS || '50,100,200,400,800').split(',').map(Number);

// Before anything is measured, every target serves WARM_CALLS calls and WARM_STREAMS short
// streams (8 at a time, each bounded by WARM_SECONDS): what a gateway in service has long done.
// Node compiles a hot path to fast code only after thousands of calls: fresh, Framegate's
// median call took 1.4 ms, and about 0.6 ms from 3,500 calls on; a one-chunk stream 1.45 ms,
// and 0.63 to 0.89 ms after 3,000. With 250 warm-up calls and one warm-up stream, the figures described how
// fast each proxy compiles, not how fast it proxies (bench/NOTES.md).
const WARM_CALLS = Number(process.env.BENCH_WARM_CALLS || 6000);
const WARM_STREAMS = Number(process.env.BENCH_WARM_STREAMS || 3000);
const WARM_SECONDS = Number(process.env.BENCH_WARM_SECONDS || 15);

// Sections 1, 2 and 3 run each target in this many turns (see 1).
const ROUNDS = Number(process.env.BENCH_ROUNDS || 4);

const processes: ManagedProcess[] = [];
const dataDir = path.join(projectRoot, `.data/bench-chat-${process.pid}`);
const scratch = mkdtempSync(path.join(tmpdir(), 'framegate-bench-'));
const launch: Launch = { processes, scratch };
let exitCode = 0;

async function cleanUp(): Promise<void> {
  await Promise.allSettled([...processes].reverse().map((child) => child.stop()));
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void cleanUp().then(() => process.exit(130)));
}

try {
  provision();
  const ferretPort = await freePort();
  const temporalPort = await freePort();
  if (!process.env.MONGODB_URI) processes.push(await startFerretDb({ port: ferretPort, dataDir }));
  if (!process.env.TEMPORAL_ADDRESS) processes.push(await startTemporalDevServer({ port: temporalPort }));
  const mongodbUri = process.env.MONGODB_URI || `mongodb://127.0.0.1:${ferretPort}/`;
  const temporalAddress = process.env.TEMPORAL_ADDRESS || `127.0.0.1:${temporalPort}`;
  const databaseName = `bench_chat_${process.pid}`;

  const direct = await startUpstream(launch);
  const upstreamUrl = direct.origin;
  const nodeFloor = await startFloor(launch, 'node floor', 'bench/lib/bare-node-proxy.ts', upstreamUrl);
  const floor = await startFloor(launch, 'floor', 'bench/lib/bare-proxy.ts', upstreamUrl);
  const framegate = await startFramegate(launch, upstreamUrl, mongodbUri, temporalAddress, databaseName);
  const litellm = await startLiteLlm(launch, upstreamUrl);
  const targets: ChatTarget[] = [direct, nodeFloor, floor, framegate, ...(typeof litellm === 'string' ? [] : [litellm])];

  console.log(`\nFramegate chat-proxy benchmark: direct upstream vs Framegate vs LiteLLM (store ${process.env.MONGODB_URI ? 'MONGODB_URI' : 'FerretDB'})`);
  console.log(`  upstream  loopback OpenAI-compatible server in its own process (${upstreamUrl})`);
  console.log(`  node floor bench/lib/bare-node-proxy.ts: node:http + undici, no framework (${nodeFloor.origin})`);
  console.log(`  floor     bench/lib/bare-proxy.ts: Fastify + undici forwarding the body, nothing else (${floor.origin})`);
  console.log(`  every process under test logs to a file in ${scratch}, not to a pipe this process reads`);
  console.log(`  Framegate api/server.ts built (dist/api/server.mjs) in its own process, LOG_LEVEL=${process.env.BENCH_FRAMEGATE_LOG_LEVEL || 'info'}, funded account + key (calls paid from spend leases)`);
  console.log(typeof litellm === 'string' ? `  LiteLLM: unavailable (${litellm})` : `  LiteLLM   proxy ${litellm.origin}, default settings, no database, model openai/gpt-4o-mini at the same upstream`);

  // 0. Warm-up (see WARM_CALLS).
  for (const target of targets) {
    const { calls, streams: streamed } = await warmUp(target, { calls: WARM_CALLS, streams: WARM_STREAMS, seconds: WARM_SECONDS });
    console.log(`  warm-up   ${target.name}: ${calls.completed} calls, ${streamed.completed} one-chunk streams (${calls.errors + streamed.errors} errors)`);
  }

  // 1. Added latency at concurrency 1, in turns (lib/chat-sections.ts).
  const latency = pooled(await inTurns(targets, ROUNDS, (target) => measureLatency(target, Math.ceil(LATENCY_REQUESTS / ROUNDS), 120 / ROUNDS)), mergeLoads);

  // 1b. Calls after a pause: a round calls each target once, rounds PAUSE_MS apart, so every
  // call meets a process that has been idle that long (caches aged, leases possibly given back).
  // The order rotates: whoever is called first after the pause also wakes the idle CPU.
  const paused = new Map<string, number[]>(targets.map((target) => [target.name, []]));
  for (let round = 0; round < PAUSED_CALLS; round++) {
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    for (const target of rotate(targets, round)) {
      const started = performance.now();
      if (await complete(target, 'ping')) paused.get(target.name)!.push(performance.now() - started);
    }
  }

  // 2. Throughput at 50 concurrent connections, 20 ms upstream delay, in turns as in 1, with
  // the CPU time the target's own process spent; Framegate once more with the calls spread
  // over 50 accounts.
  const throughput = pooled(await inTurns(targets, ROUNDS, (target) => measureThroughput(target, Math.ceil(THROUGHPUT_REQUESTS / ROUNDS), THROUGHPUT_SECONDS / ROUNDS)), mergeLoads);
  const spread = await framegateAccounts(framegate, THROUGHPUT_CONCURRENCY);
  const spreadLoad = await measureThroughput(framegate, THROUGHPUT_REQUESTS, THROUGHPUT_SECONDS, spread);

  // 3. Streaming: 64 chunks 20 ms apart, in turns as in 1 (the TTFT tail is where a
  // disturbance of a few seconds shows first).
  const streams = pooled(await inTurns(targets, ROUNDS, (target) => measureStreams(target, Math.ceil(STREAMS / ROUNDS), 120 / ROUNDS)), mergeStreamBlocks);

  // 4. The most concurrent streams held with no lost chunk.
  const capacity = new Map<string, StreamCapacity>();
  for (const target of targets) capacity.set(target.name, await streamCapacity(target, CAPACITY_LEVELS, 64));

  printChatReport({
    names: targets.map((target) => target.name),
    latency,
    paused: { calls: paused, pauseMs: PAUSE_MS },
    throughput,
    spread: { name: spread[0]!.name, load: spreadLoad },
    streams,
    capacity,
    capacityLevels: CAPACITY_LEVELS,
    ...(typeof litellm === 'string' ? { litellmUnavailable: litellm } : {}),
    sizes: {
      rounds: ROUNDS,
      latencyRequests: LATENCY_REQUESTS,
      throughputRequests: THROUGHPUT_REQUESTS,
      throughputSeconds: THROUGHPUT_SECONDS,
      concurrency: THROUGHPUT_CONCURRENCY,
      streams: STREAMS,
      streamConcurrency: STREAM_CONCURRENCY,
    },
  });

  await Promise.allSettled(targets.map((target) => target.pool.close()));
  const database = await connectDatabase(mongodbUri, databaseName);
  await database.db.dropDatabase().catch(() => undefined);
  await database.close();
} catch (error) {
  exitCode = 1;
  console.error(`[bench] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  for (const child of processes) {
    const output = child.recentOutput().trim();
    if (output) console.error(`[bench] last output of ${child.name}:\n${output.split('\n').slice(-15).join('\n')}`);
  }
} finally {
  await cleanUp();
}
process.exit(exitCode);
