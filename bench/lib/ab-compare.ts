import type { StreamBlock } from './chat-sections.ts';
import { percentile, seededRandom } from './stats.ts';
import type { TimedLoad } from './proxy-load.ts';

// The verdicts of bench/chat-ab.ts. Builds take turns, and every turn gives one value of each
// figure per build (against the direct upstream's in the same turn). The first build runs
// twice, as two processes (the control); a candidate's turns are compared with the control's
// by a permutation test on the difference of their means: how often do the same values, dealt
// at random into a candidate's share and the control's, differ at least as much? A change is
// called only below SIGNIFICANCE. A rule such as "further apart than the control's two
// processes" calls an identical build changed in about 45 % of cases per figure (one sample of
// the noise against another); the same test between the control's two processes shows how
// often this run would do that.

/** p-values below this call a figure changed. */
export const SIGNIFICANCE = 0.01;
const PERMUTATIONS = 20_000;

/** One build's figures, each against the direct upstream's in the same run. */
export interface BuildFigures {
  addedLatencyP50Ms: number;
  addedLatencyP99Ms: number;
  /** Calls per second at 50 connections, as a share of direct's. */
  throughputRatio: number;
  /** CPU time of the api process per call in the throughput section. */
  cpuPerCallUs: number;
  addedTtftP50Ms: number;
  addedTtftP90Ms: number;
  addedTtftP99Ms: number;
}

export type FigureName = keyof BuildFigures;

export const FIGURES: { name: FigureName; label: string; better: 'lower' | 'higher'; digits: number }[] = [
  { name: 'addedLatencyP50Ms', label: 'added latency p50 ms', better: 'lower', digits: 3 },
  { name: 'addedLatencyP99Ms', label: 'added latency p99 ms', better: 'lower', digits: 3 },
  { name: 'throughputRatio', label: 'throughput × direct', better: 'higher', digits: 3 },
  { name: 'cpuPerCallUs', label: 'CPU per call µs', better: 'lower', digits: 0 },
  { name: 'addedTtftP50Ms', label: 'added TTFT p50 ms', better: 'lower', digits: 3 },
  { name: 'addedTtftP90Ms', label: 'added TTFT p90 ms', better: 'lower', digits: 3 },
  { name: 'addedTtftP99Ms', label: 'added TTFT p99 ms', better: 'lower', digits: 3 },
];

export interface Measured {
  latency: TimedLoad;
  throughput: TimedLoad;
  streams: StreamBlock;
}

export function figuresOf(target: Measured, direct: Measured): BuildFigures {
  const latency = (measured: Measured, fraction: number) => percentile(measured.latency.latenciesMs, fraction);
  const ttft = (measured: Measured, fraction: number) => percentile(measured.streams.timings.map((timing) => timing.ttftMs), fraction);
  return {
    addedLatencyP50Ms: latency(target, 0.5) - latency(direct, 0.5),
    addedLatencyP99Ms: latency(target, 0.99) - latency(direct, 0.99),
    throughputRatio: target.throughput.perSecond / direct.throughput.perSecond,
    cpuPerCallUs: ((target.throughput.cpuMs ?? Number.NaN) * 1000) / target.throughput.completed,
    addedTtftP50Ms: ttft(target, 0.5) - ttft(direct, 0.5),
    addedTtftP90Ms: ttft(target, 0.9) - ttft(direct, 0.9),
    addedTtftP99Ms: ttft(target, 0.99) - ttft(direct, 0.99),
  };
}

export type Verdict = 'better' | 'worse' | 'within noise';

export interface Comparison {
  /** The mean of the candidate's turns less the mean of the control's. */
  delta: number;
  /** Two-sided: the share of random deals that differ at least as much. */
  pValue: number;
  verdict: Verdict;
}

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

/** Two-sided permutation test of the difference of means, by random deals. */
export function permutationPValue(control: number[], candidate: number[], seed = 1): number {
  const all = [...control, ...candidate];
  const observed = Math.abs(mean(candidate) - mean(control));
  const total = all.reduce((sum, value) => sum + value, 0);
  const random = seededRandom(seed);
  let atLeast = 0;
  for (let deal = 0; deal < PERMUTATIONS; deal++) {
    // A partial Fisher-Yates shuffle: the first candidate.length places form the candidate's share.
    let share = 0;
    for (let index = 0; index < candidate.length; index++) {
      const pick = index + Math.floor(random() * (all.length - index));
      [all[index], all[pick]] = [all[pick]!, all[index]!];
      share += all[index]!;
    }
    const difference = share / candidate.length - (total - share) / control.length;
    // A tolerance for float sums: the observed deal itself must count.
    if (Math.abs(difference) >= observed - 1e-12) atLeast++;
  }
  return (atLeast + 1) / (PERMUTATIONS + 1);
}

/** Each figure of a candidate's turns against the control's turns. */
export function compareTurns(control: BuildFigures[], candidate: BuildFigures[]): Record<FigureName, Comparison> {
  const result = {} as Record<FigureName, Comparison>;
  for (const { name, better } of FIGURES) {
    const controlValues = control.map((figures) => figures[name]).filter(Number.isFinite);
    const candidateValues = candidate.map((figures) => figures[name]).filter(Number.isFinite);
    const delta = mean(candidateValues) - mean(controlValues);
    const pValue = permutationPValue(controlValues, candidateValues);
    let verdict: Verdict = 'within noise';
    if (pValue < SIGNIFICANCE) verdict = (delta < 0) === (better === 'lower') ? 'better' : 'worse';
    result[name] = { delta, pValue, verdict };
  }
  return result;
}
