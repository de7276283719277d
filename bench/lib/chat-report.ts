import { addedPercentileInterval } from './stats.ts';
import { fmt, HELD_GAP_P99_MS, HELD_TTFT_P99_MS, p, type StreamCapacity, type StreamTiming, type TimedLoad } from './proxy-load.ts';

// The tables and the summary of bench/chat-proxy.ts, from what it measured. Targets by name:
// 'direct' (the upstream itself, the base of every "added" figure), 'floor' (bare Fastify +
// undici), 'Framegate', 'LiteLLM' (absent when it could not start).

export interface ChatMeasurements {
  names: string[];
  latency: Map<string, TimedLoad>;
  /** Latencies of calls that each followed a pause of `pauseMs`. */
  paused: { calls: Map<string, number[]>; pauseMs: number };
  throughput: Map<string, TimedLoad>;
  /** Framegate's throughput run repeated over many accounts. */
  spread: { name: string; load: TimedLoad };
  streams: Map<string, { timings: StreamTiming[]; load: TimedLoad }>;
  capacity: Map<string, StreamCapacity>;
  capacityLevels: number[];
  litellmUnavailable?: string;
  sizes: { rounds: number; latencyRequests: number; throughputRequests: number; throughputSeconds: number; concurrency: number; streams: number; streamConcurrency: number };
}

function row(cells: string[], widths: number[]): string {
  return cells.map((cell, index) => (index === 0 ? cell.padEnd(widths[index]!) : cell.padStart(widths[index]!))).join('  ');
}

function ratio(value: number, base: number): string {
  if (!(Number.isFinite(value) && Number.isFinite(base) && base > 0)) return 'n/a';
  const quotient = value / base;
  return `${quotient >= 0.1 ? quotient.toFixed(2) : quotient.toPrecision(2)}×`;
}

/** A difference with its sign: +0.30, -0.38. */
function signed(value: number): string {
  return value >= 0 ? `+${fmt(value)}` : fmt(value);
}

/** CPU microseconds the target's own process spent per call completed. */
function cpuPerCallUs(load: TimedLoad): number {
  return ((load.cpuMs ?? Number.NaN) * 1000) / load.completed;
}

/** "node floor [+0.31, +1.20]": each proxy's 95 % interval of an added p99
 * (stats.ts addedPercentileInterval), so a p99 target is read as met, missed or not told. */
function p99Intervals(names: string[], samplesOf: (name: string) => number[]): string {
  const base = samplesOf('direct');
  return names
    .filter((name) => name !== 'direct')
    .map((name) => {
      const [low, high] = addedPercentileInterval(samplesOf(name), base, 0.99);
      return `${name} [${signed(low)}, ${signed(high)}]`;
    })
    .join(', ');
}

function firstError(load: TimedLoad): void {
  if (load.firstError) console.log(`    first error: ${load.firstError}`);
}

export function printChatReport(m: ChatMeasurements): void {
  const { names, sizes } = m;
  const base = m.latency.get('direct')!;
  console.log(`\n1. Non-stream latency, concurrency 1, zero-delay upstream (${sizes.latencyRequests} requests each in ${sizes.rounds} turns, after the warm-up and 200 more calls per turn)`);
  const w1 = [10, 8, 10, 10, 14, 14, 10, 8];
  console.log(row(['', 'count', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'p50 ratio', 'errors'], w1));
  for (const name of names) {
    const load = m.latency.get(name)!;
    const p50 = p(load.latenciesMs, 0.5);
    const p99 = p(load.latenciesMs, 0.99);
    const isBase = name === 'direct';
    const cells = [name, String(load.completed), fmt(p50), fmt(p99), isBase ? '-' : fmt(p50 - p(base.latenciesMs, 0.5)), isBase ? '-' : fmt(p99 - p(base.latenciesMs, 0.99)), ratio(p50, p(base.latenciesMs, 0.5)), String(load.errors)];
    console.log(row(cells, w1));
    firstError(load);
  }
  console.log(`   added p99, 95 % bootstrap interval (ms): ${p99Intervals(names, (name) => m.latency.get(name)!.latenciesMs)}`);

  const pausedBase = m.paused.calls.get('direct')!;
  const maxOf = (samples: number[]) => (samples.length ? Math.max(...samples) : Number.NaN);
  const pausedBaseMax = maxOf(pausedBase);
  console.log(`\n1b. Calls after a ${m.paused.pauseMs} ms pause, concurrency 1, zero-delay upstream (${pausedBase.length} calls each)`);
  const w1b = [10, 8, 10, 10, 14, 14];
  console.log(row(['', 'count', 'p50 ms', 'max ms', 'added p50 ms', 'added max ms'], w1b));
  for (const name of names) {
    const calls = m.paused.calls.get(name)!;
    const isBase = name === 'direct';
    const max = maxOf(calls);
    console.log(row([name, String(calls.length), fmt(p(calls, 0.5)), fmt(max), isBase ? '-' : fmt(p(calls, 0.5) - p(pausedBase, 0.5)), isBase ? '-' : fmt(max - pausedBaseMax)], w1b));
  }

  const ideal = (sizes.concurrency * 1000) / 20;
  console.log(`\n2. Throughput, ${sizes.concurrency} concurrent connections, upstream answers after 20 ms (up to ${sizes.throughputRequests} requests or ${sizes.throughputSeconds} s each, in ${sizes.rounds} turns; ceiling ${ideal} req/s)`);
  const w2 = [22, 8, 8, 10, 10, 10, 12, 13, 8];
  console.log(row(['', 'count', 'seconds', 'req/s', 'p50 ms', 'p99 ms', 'vs direct', 'CPU µs/call', 'errors'], w2));
  const baseThroughput = m.throughput.get('direct')!;
  const rows: Array<[string, TimedLoad]> = names.map((name) => [name, m.throughput.get(name)!]);
  rows.splice(names.indexOf('Framegate') + 1, 0, [m.spread.name, m.spread.load]);
  for (const [name, load] of rows) {
    console.log(row([name, String(load.completed), fmt(load.seconds, 1), fmt(load.perSecond, 0), fmt(p(load.latenciesMs, 0.5)), fmt(p(load.latenciesMs, 0.99)), ratio(load.perSecond, baseThroughput.perSecond), fmt(cpuPerCallUs(load), 0), String(load.errors)], w2));
    firstError(load);
  }
  console.log("   (CPU µs/call: user + system time of the target's own process per call; for direct, the upstream's; for a proxy, the proxy's alone)");

  console.log(`\n3. Streaming, 64 chunks 20 ms apart (${sizes.streams} streams each in ${sizes.rounds} turns, ${sizes.streamConcurrency} at a time, started apart; TTFT = request sent → first content delta)`);
  const w3 = [10, 8, 10, 10, 12, 12, 9, 9, 9, 8, 8];
  console.log(row(['', 'streams', 'TTFT p50', 'TTFT p99', 'added p50', 'added p99', 'gap p50', 'gap p99', 'gap max', 'chunks', 'errors'], w3));
  const ttftOf = (name: string) => m.streams.get(name)!.timings.map((timing) => timing.ttftMs);
  const baseTtft = ttftOf('direct');
  for (const name of names) {
    const { timings, load } = m.streams.get(name)!;
    const ttft = ttftOf(name);
    const gaps = timings.flatMap((timing) => timing.gapsMs);
    const chunks = timings.length ? Math.min(...timings.map((timing) => timing.contentChunks)) : Number.NaN;
    const isBase = name === 'direct';
    const cells = [
      name,
      String(timings.length),
      fmt(p(ttft, 0.5)),
      fmt(p(ttft, 0.99)),
      isBase ? '-' : fmt(p(ttft, 0.5) - p(baseTtft, 0.5)),
      isBase ? '-' : fmt(p(ttft, 0.99) - p(baseTtft, 0.99)),
      fmt(p(gaps, 0.5)),
      fmt(p(gaps, 0.99)),
      fmt(gaps.length ? Math.max(...gaps) : Number.NaN),
      String(chunks),
      String(load.errors),
    ];
    console.log(row(cells, w3));
    firstError(load);
  }
  console.log('   (all figures in ms; "chunks" = fewest content deltas one stream delivered; the upstream sends 64)');
  console.log(`   added TTFT p99, 95 % bootstrap interval (ms): ${p99Intervals(names, ttftOf)}`);

  console.log(`\n4. Concurrent streams held: 64 chunks each, all delivered, gap p99 ≤ ${HELD_GAP_P99_MS} ms, TTFT p99 ≤ ${HELD_TTFT_P99_MS} ms (levels ${m.capacityLevels.join(', ')})`);
  const w4 = [10, 8, 12, 12, 40];
  console.log(row(['', 'held', 'gap p99 ms', 'TTFT p99 ms', 'first level that failed'], w4));
  for (const name of names) {
    const held = m.capacity.get(name)!;
    const failed = held.failedAt ? `${held.failedAt.streams}: ${held.failedAt.reason}` : 'none';
    console.log(row([name, String(held.held), fmt(held.gapP99Ms), fmt(held.ttftP99Ms), failed.slice(0, 60)], w4));
  }

  const added = (name: string, fraction = 0.5) => p(m.latency.get(name)!.latenciesMs, fraction) - p(base.latenciesMs, fraction);
  const addedTtft = (name: string, fraction = 0.5) => p(ttftOf(name), fraction) - p(baseTtft, fraction);
  const perSecond = (name: string) => m.throughput.get(name)!.perSecond;
  const line = (name: string) =>
    `${signed(added(name))} ms p50 / ${signed(added(name, 0.99))} ms p99 latency, ${fmt(perSecond(name), 0)} req/s at ${sizes.concurrency} connections (${ratio(perSecond(name), baseThroughput.perSecond)} of direct), ${signed(addedTtft(name))} ms TTFT p50 / ${signed(addedTtft(name, 0.99))} ms p99`;
  console.log('\nSummary');
  for (const name of names.filter((name) => name !== 'direct')) console.log(`  ${name.padEnd(10)} ${line(name)}`);
  console.log(`  Framegate over ${sizes.concurrency} accounts: ${fmt(m.spread.load.perSecond, 0)} req/s`);
  const cpuOf = (name: string) => cpuPerCallUs(m.throughput.get(name)!);
  console.log(`  CPU per call at ${sizes.concurrency} connections: ${names.map((name) => `${name} ${fmt(cpuOf(name), 0)} µs`).join(', ')} (direct: the upstream itself)`);
  const pausedAdded = (name: string) => p(m.paused.calls.get(name)!, 0.5) - p(pausedBase, 0.5);
  console.log(`  After a ${m.paused.pauseMs} ms pause, added p50: ${names.filter((name) => name !== 'direct').map((name) => `${name} ${signed(pausedAdded(name))} ms`).join(', ')}`);
  console.log(`  Concurrent streams held: ${names.map((name) => `${name} ${m.capacity.get(name)!.held}`).join(', ')}`);
  if (names.includes('floor')) {
    console.log(`  Framegate above the floor: ${signed(added('Framegate') - added('floor'))} ms p50 latency, ${signed(addedTtft('Framegate') - addedTtft('floor'))} ms TTFT p50, throughput ${ratio(perSecond('Framegate'), perSecond('floor'))} of the floor's, CPU per call ${ratio(cpuOf('Framegate'), cpuOf('floor'))} of the floor's`);
  }
  if (m.litellmUnavailable) {
    console.log(`  LiteLLM: unavailable (${m.litellmUnavailable})`);
  } else {
    console.log(`  Framegate/LiteLLM: added p50 latency ${ratio(added('Framegate'), added('LiteLLM'))}, throughput ${ratio(perSecond('Framegate'), perSecond('LiteLLM'))}, added TTFT p50 ${ratio(addedTtft('Framegate'), addedTtft('LiteLLM'))}, CPU per call ${ratio(cpuOf('Framegate'), cpuOf('LiteLLM'))}`);
  }
}
