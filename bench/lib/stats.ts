// Small helpers for benchmark figures: percentiles over samples and a bounded concurrent loop.

export function percentile(samples: number[], fraction: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]!;
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
