// Small helpers for benchmark figures: percentiles over samples, how far to trust an added
// percentile, and a bounded concurrent loop.

export function percentile(samples: number[], fraction: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[rankOf(sorted.length, fraction)]!;
}

/** The index of the `fraction` percentile in `count` sorted samples (nearest rank). */
function rankOf(count: number, fraction: number): number {
  return Math.min(count - 1, Math.max(0, Math.ceil(fraction * count) - 1));
}

/** A small seeded generator (mulberry32), so a run's statistics can be computed again. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The `fraction` percentile of a resample (with replacement) of `samples`. */
function resampledPercentile(samples: Float64Array, fraction: number, random: () => number, scratch: Float64Array): number {
  for (let index = 0; index < scratch.length; index++) scratch[index] = samples[Math.floor(random() * samples.length)]!;
  scratch.sort();
  return scratch[rankOf(scratch.length, fraction)]!;
}

/** A 95 % bootstrap interval of an added percentile, percentile(target) − percentile(base):
 * how far the same machine could have moved the figure by chance. A p99 of 200 streams is the
 * third slowest, and a few streams that met a hiccup of the machine decide it: two runs of the
 * same code read it more than 1 ms apart (bench/NOTES.md). Seeded, so a run's intervals
 * can be computed again. */
export function addedPercentileInterval(target: number[], base: number[], fraction: number, options: { resamples?: number; seed?: number } = {}): [number, number] {
  if (target.length === 0 || base.length === 0) return [Number.NaN, Number.NaN];
  const resamples = options.resamples ?? 1000;
  const random = seededRandom(options.seed ?? 1);
  const targets = Float64Array.from(target);
  const bases = Float64Array.from(base);
  const targetScratch = new Float64Array(targets.length);
  const baseScratch = new Float64Array(bases.length);
  const differences = new Float64Array(resamples);
  for (let index = 0; index < resamples; index++) {
    differences[index] = resampledPercentile(targets, fraction, random, targetScratch) - resampledPercentile(bases, fraction, random, baseScratch);
  }
  differences.sort();
  return [differences[rankOf(resamples, 0.025)]!, differences[rankOf(resamples, 0.975)]!];
}

export interface LoadResult {
  latenciesMs: number[];
  seconds: number;
  perSecond: number;
  errors: number;
}

/** Runs `total` calls of `operation` with at most `concurrency` in flight; times each one. */
export async function runLoad(total: number, concurrency: number, operation: (index: number) => Promise<boolean>): Promise<LoadResult> {
  const latenciesMs: number[] = [];
  let next = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const index = next++;
        const begin = performance.now();
        const ok = await operation(index).catch(() => false);
        latenciesMs.push(performance.now() - begin);
        if (!ok) errors++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { latenciesMs, seconds, perSecond: total / seconds, errors };
}

export function describeLoad(label: string, result: LoadResult): string {
  const p50 = percentile(result.latenciesMs, 0.5).toFixed(2);
  const p99 = percentile(result.latenciesMs, 0.99).toFixed(2);
  return `${label.padEnd(44)} p50 ${p50.padStart(8)} ms   p99 ${p99.padStart(8)} ms   ${result.perSecond.toFixed(0).padStart(6)} req/s   errors ${result.errors}`;
}
