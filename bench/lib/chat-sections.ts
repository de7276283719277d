import { processTreeCpuMs } from './process-cpu.ts';
import { complete, mergeLoads, runTimedLoad, timeStream, type ChatTarget, type StreamTiming, type TimedLoad } from './proxy-load.ts';

// The measured sections that bench/chat-proxy.ts and bench/chat-ab.ts share, so that both read
// the same figure the same way, and the turns they run them in.

/** Throughput runs: 50 connections, the upstream answering after 20 ms. */
export const THROUGHPUT_CONCURRENCY = 50;
/** Streams: 4 at a time, the first four started this far apart. Streams of 64 chunks 20 ms apart
 * last about 1.3 s: a quarter of that apart keeps their first chunks from queueing behind each
 * other, so the time to first token measures one stream's path. */
export const STREAM_CONCURRENCY = 4;
const STREAM_STAGGER_MS = 330;

export interface WarmUp {
  calls: number;
  streams: number;
  /** Bound on each of the two loops. */
  seconds: number;
}

/** What a gateway in service has long done before it is measured: Node compiles a hot path to
 * fast code only after thousands of calls (bench/NOTES.md). */
export async function warmUp(target: ChatTarget, sizes: WarmUp): Promise<{ calls: TimedLoad; streams: TimedLoad }> {
  const calls = await runTimedLoad(8, sizes.calls, sizes.seconds, () => complete(target, 'warm up'));
  const streams = await runTimedLoad(8, sizes.streams, sizes.seconds, async () => (await timeStream(target, 'warm up [up:chunks=1]')).contentChunks === 1);
  return { calls, streams };
}

/** The targets in turn order for one round: each round starts one later. */
export function rotate<T>(items: T[], round: number): T[] {
  const start = round % items.length;
  return [...items.slice(start), ...items.slice(0, start)];
}

/** Runs `measure` for every target in `rounds` turns, the order rotating: each target's blocks,
 * one per turn. A disturbance of a few seconds on this shared machine then falls on every
 * target alike instead of on whichever ran then. */
export async function inTurns<Block>(targets: ChatTarget[], rounds: number, measure: (target: ChatTarget) => Promise<Block>): Promise<Map<string, Block[]>> {
  const blocks = new Map<string, Block[]>(targets.map((target) => [target.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const target of rotate(targets, round)) blocks.get(target.name)!.push(await measure(target));
  }
  return blocks;
}

/** Each target's turns pooled into one block. */
export function pooled<Block>(blocks: Map<string, Block[]>, merge: (blocks: Block[]) => Block): Map<string, Block> {
  return new Map([...blocks].map(([name, measured]) => [name, merge(measured)]));
}

/** Non-stream calls one at a time to a zero-delay upstream. Each block starts with 200
 * unmeasured calls: the target has sat idle while the others ran (with 20, the proxies' p50
 * read about 0.1 ms higher than run in one go; with 200, the same). */
export async function measureLatency(target: ChatTarget, calls: number, seconds: number): Promise<TimedLoad> {
  await runTimedLoad(1, 200, 30, () => complete(target, 'warm up'));
  return runTimedLoad(1, calls, seconds, () => complete(target, 'ping'));
}

/** THROUGHPUT_CONCURRENCY connections against a 20 ms upstream, with the CPU time the target's
 * own process spent meanwhile (bench/lib/process-cpu.ts says why). */
export async function measureThroughput(target: ChatTarget, maxCalls: number, seconds: number, spreadOver: ChatTarget[] = [target]): Promise<TimedLoad> {
  await runTimedLoad(THROUGHPUT_CONCURRENCY, 200, 20, (index) => complete(spreadOver[index % spreadOver.length]!, 'warm up [up:delay=20]'));
  const before = processTreeCpuMs(target.pid);
  const measured = await runTimedLoad(THROUGHPUT_CONCURRENCY, maxCalls, seconds, (index) => complete(spreadOver[index % spreadOver.length]!, 'ping [up:delay=20]'));
  return { ...measured, cpuMs: processTreeCpuMs(target.pid) - before };
}

export interface StreamBlock {
  timings: StreamTiming[];
  load: TimedLoad;
}

/** `count` streams of 64 chunks 20 ms apart, STREAM_CONCURRENCY at a time, started apart. */
export async function measureStreams(target: ChatTarget, count: number, seconds: number): Promise<StreamBlock> {
  const timings: StreamTiming[] = [];
  const load = await runTimedLoad(STREAM_CONCURRENCY, count, seconds, async (index) => {
    if (index < STREAM_CONCURRENCY) await new Promise((resolve) => setTimeout(resolve, index * STREAM_STAGGER_MS));
    timings.push(await timeStream(target, 'stream please'));
    return true;
  });
  return { timings, load };
}

export function mergeStreamBlocks(blocks: StreamBlock[]): StreamBlock {
  return { timings: blocks.flatMap((block) => block.timings), load: mergeLoads(blocks.map((block) => block.load)) };
}
