import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compareTurns, figuresOf, permutationPValue, type BuildFigures, type Measured } from '../../bench/lib/ab-compare.ts';
import type { TimedLoad } from '../../bench/lib/proxy-load.ts';

/** Six turns of a build whose figures are `base`, each turn moved by a small wobble. */
function turns(base: BuildFigures, wobble: number[]): BuildFigures[] {
  return wobble.map((step) => Object.fromEntries(Object.entries(base).map(([name, value]) => [name, value * (1 + step)])) as unknown as BuildFigures);
}

const base: BuildFigures = { addedLatencyP50Ms: 0.2, addedLatencyP99Ms: 1.6, throughputRatio: 0.88, cpuPerCallUs: 140, addedTtftP50Ms: 0.7, addedTtftP90Ms: 0.9, addedTtftP99Ms: 1.5 };
const wobbleA = [0.02, -0.03, 0.01, -0.01, 0.03, -0.02];
const wobbleB = [-0.02, 0.025, -0.015, 0.01, -0.03, 0.02];

describe('bench:chat-ab verdicts', () => {
  it('finds two samples from one build alike, and two well apart different', () => {
    const alike = permutationPValue([1.0, 1.2, 0.9, 1.1, 1.05, 0.95], [1.02, 1.15, 0.92, 1.08, 0.98, 1.0]);
    assert.ok(alike > 0.5, `p = ${alike} for samples drawn alike`);
    const apart = permutationPValue([1.0, 1.2, 0.9, 1.1, 1.05, 0.95, 1.0, 1.1], [1.5, 1.6, 1.45, 1.55, 1.7, 1.52]);
    assert.ok(apart < 0.01, `p = ${apart} for samples well apart`);
    // Seeded: the same values give the same p-value.
    assert.equal(permutationPValue([1, 2, 3, 4], [2, 3, 5]), permutationPValue([1, 2, 3, 4], [2, 3, 5]));
  });

  it('calls a figure changed only when every turn says so, in the figure\'s own direction', () => {
    const control = [...turns(base, wobbleA), ...turns(base, wobbleB)];
    const candidate = turns(
      { ...base, addedLatencyP50Ms: 0.15, throughputRatio: 0.93, cpuPerCallUs: 170, addedTtftP99Ms: 1.52 },
      [0.01, -0.01, 0.02, -0.02, 0.015, -0.015],
    );
    const compared = compareTurns(control, candidate);
    assert.equal(compared.addedLatencyP50Ms.verdict, 'better');
    assert.ok(Math.abs(compared.addedLatencyP50Ms.delta - -0.05) < 0.005);
    assert.equal(compared.throughputRatio.verdict, 'better', 'higher throughput is better');
    assert.equal(compared.cpuPerCallUs.verdict, 'worse', 'more CPU per call is worse');
    assert.equal(compared.addedTtftP99Ms.verdict, 'within noise', 'a 1 % move inside a 3 % wobble');
    assert.equal(compared.addedLatencyP99Ms.verdict, 'within noise');
  });

  it('reads every figure against the direct upstream of the same turn', () => {
    const load = (latenciesMs: number[], perSecond: number, cpuMs?: number): TimedLoad => ({ completed: 100, errors: 0, seconds: 1, perSecond, latenciesMs, cpuMs });
    const streams = (ttfts: number[]) => ({ timings: ttfts.map((ttftMs) => ({ ttftMs, gapsMs: [], contentChunks: 64, total: 1300 })), load: load([], 0) });
    const hundred = (start: number) => Array.from({ length: 100 }, (_, index) => start + index / 100);
    const direct: Measured = { latency: load(hundred(0.5), 2400), throughput: load([], 2400, 5), streams: streams(hundred(1)) };
    const target: Measured = { latency: load(hundred(0.7), 2160), throughput: load([], 2160, 15), streams: streams(hundred(1.5)) };
    const figures = figuresOf(target, direct);
    assert.ok(Math.abs(figures.addedLatencyP50Ms - 0.2) < 1e-9);
    assert.ok(Math.abs(figures.addedLatencyP99Ms - 0.2) < 1e-9);
    assert.ok(Math.abs(figures.throughputRatio - 0.9) < 1e-9);
    assert.equal(figures.cpuPerCallUs, 150);
    assert.ok(Math.abs(figures.addedTtftP90Ms - 0.5) < 1e-9);
  });
});
