import { Pool } from 'undici';
import { percentile } from './stats.ts';

// Load and timing helpers for bench/chat-proxy.ts: one chat target (direct upstream, Framegate,
// LiteLLM) behind a keep-alive pool, a bounded timed loop, and SSE arrival times.

export interface ChatTarget {
  name: string;
  origin: string;
  headers: Record<string, string>;
  pool: Pool;
  /** The process that serves the target (the upstream, for direct), for its CPU time. */
  pid?: number;
}

export function chatTarget(name: string, origin: string, options: { key?: string; pid?: number } = {}): ChatTarget {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  return { name, origin, headers, pool: new Pool(origin, { connections: 64, pipelining: 1, keepAliveTimeout: 30_000 }), pid: options.pid };
}

export function chatBody(content: string, stream = false): string {
  return JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 16, stream, messages: [{ role: 'user', content }] });
}

/** One non-stream completion; true on a 200 whose body parses. */
export async function complete(target: ChatTarget, content: string): Promise<boolean> {
  const response = await target.pool.request({ method: 'POST', path: '/v1/chat/completions', headers: target.headers, body: chatBody(content) });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`${target.name}: HTTP ${response.statusCode} ${text.slice(0, 300)}`);
  return Array.isArray(JSON.parse(text).choices);
}

export interface TimedLoad {
  completed: number;
  errors: number;
  seconds: number;
  perSecond: number;
  latenciesMs: number[];
  firstError?: string;
  /** CPU milliseconds the target's process spent meanwhile, where measured. */
  cpuMs?: number;
}

/** At most `maxRequests` calls with `concurrency` in flight, and no new call after `maxSeconds`. */
export async function runTimedLoad(
  concurrency: number,
  maxRequests: number,
  maxSeconds: number,
  operation: (index: number) => Promise<boolean>,
): Promise<TimedLoad> {
  const latenciesMs: number[] = [];
  let next = 0;
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  const started = performance.now();
  const deadline = started + maxSeconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < maxRequests && performance.now() < deadline) {
        const index = next++;
        const begin = performance.now();
        const ok = await operation(index).catch((error: unknown) => {
          firstError ??= error instanceof Error ? error.message : String(error);
          return false;
        });
        latenciesMs.push(performance.now() - begin);
        if (ok) completed++;
        else errors++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { completed, errors, seconds, perSecond: completed / seconds, latenciesMs, firstError };
}

/** Loads run in turns (rounds) as one: counts and time added up, latencies pooled. */
export function mergeLoads(loads: TimedLoad[]): TimedLoad {
  const completed = loads.reduce((sum, load) => sum + load.completed, 0);
  const seconds = loads.reduce((sum, load) => sum + load.seconds, 0);
  return {
    completed,
    errors: loads.reduce((sum, load) => sum + load.errors, 0),
    seconds,
    perSecond: completed / seconds,
    latenciesMs: loads.flatMap((load) => load.latenciesMs),
    firstError: loads.find((load) => load.firstError !== undefined)?.firstError,
    cpuMs: loads.reduce((sum, load) => sum + (load.cpuMs ?? Number.NaN), 0),
  };
}

export interface StreamTiming {
  /** Request sent → first content delta arrived. */
  ttftMs: number;
  /** Gaps between consecutive content deltas as the client received them. */
  gapsMs: number[];
  contentChunks: number;
  total: number;
}

/** One streamed completion, timing each `data:` event carrying delta content as it arrives. */
export async function timeStream(target: ChatTarget, content: string): Promise<StreamTiming> {
  const begin = performance.now();
  const response = await target.pool.request({ method: 'POST', path: '/v1/chat/completions', headers: target.headers, body: chatBody(content, true) });
  if (response.statusCode !== 200) throw new Error(`${target.name}: HTTP ${response.statusCode} ${(await response.body.text()).slice(0, 300)}`);
  const arrivals: number[] = [];
  let pending = '';
  let done = false;
  for await (const part of response.body) {
    const now = performance.now();
    pending += (part as Buffer).toString('utf8');
    const events = pending.split(/\r?\n\r?\n/);
    pending = events.pop() ?? '';
    for (const event of events) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (!data) continue;
      if (data === '[DONE]') {
        done = true;
        continue;
      }
      const chunk = JSON.parse(data);
      if (chunk.choices?.[0]?.delta?.content) arrivals.push(now);
    }
  }
  if (!done) throw new Error(`${target.name}: the stream ended without [DONE]`);
  if (arrivals.length === 0) throw new Error(`${target.name}: no content chunk`);
  const gapsMs = arrivals.slice(1).map((at, index) => at - arrivals[index]!);
  return { ttftMs: arrivals[0]! - begin, gapsMs, contentChunks: arrivals.length, total: performance.now() - begin };
}

export function fmt(value: number, digits = 2): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

export function p(samples: number[], fraction: number): number {
  return percentile(samples, fraction);
}

export interface StreamCapacity {
  /** The most concurrent streams that all arrived whole (0 when even the first level failed). */
  held: number;
  /** The level that failed, and why; absent when every level held. */
  failedAt?: { streams: number; reason: string };
  /** At the highest level held: inter-chunk gap p99 and TTFT p99, ms. */
  gapP99Ms: number;
  ttftP99Ms: number;
}

/** A level is held when every stream delivers every chunk, and in time: TCP loses nothing, so
 * an overloaded proxy shows as chunks arriving late, not as chunks missing. */
export const HELD_GAP_P99_MS = 100;
export const HELD_TTFT_P99_MS = 1_000;

/** Opens `levels` concurrent streams in turn (each on its own connections) until a level
 * fails: an error, a lost chunk, gap p99 above HELD_GAP_P99_MS or TTFT p99 above
 * HELD_TTFT_P99_MS. */
export async function streamCapacity(target: ChatTarget, levels: number[], chunks: number): Promise<StreamCapacity> {
  const result: StreamCapacity = { held: 0, gapP99Ms: Number.NaN, ttftP99Ms: Number.NaN };
  for (const streams of levels) {
    const pool = new Pool(target.origin, { connections: streams, pipelining: 1, keepAliveTimeout: 30_000 });
    const wide: ChatTarget = { ...target, pool };
    const outcomes = await Promise.allSettled(Array.from({ length: streams }, () => timeStream(wide, `capacity [up:chunks=${chunks}]`)));
    await pool.close();
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    const timings = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    const short = timings.find((timing) => timing.contentChunks < chunks);
    const gapP99Ms = percentile(timings.flatMap((timing) => timing.gapsMs), 0.99);
    const ttftP99Ms = percentile(timings.map((timing) => timing.ttftMs), 0.99);
    let reason: string | undefined;
    if (failed) reason = String((failed as PromiseRejectedResult).reason).slice(0, 120);
    else if (short) reason = `a stream delivered ${short.contentChunks} of ${chunks} chunks`;
    else if (gapP99Ms > HELD_GAP_P99_MS) reason = `gap p99 ${gapP99Ms.toFixed(0)} ms`;
    else if (ttftP99Ms > HELD_TTFT_P99_MS) reason = `TTFT p99 ${ttftP99Ms.toFixed(0)} ms`;
    if (reason) {
      result.failedAt = { streams, reason };
      return result;
    }
    result.held = streams;
    result.gapP99Ms = gapP99Ms;
    result.ttftP99Ms = ttftP99Ms;
  }
  return result;
}
