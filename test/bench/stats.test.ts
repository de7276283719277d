import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { addedPercentileInterval, percentile, seededRandom } from '../../bench/lib/stats.ts';

// The interval bench:chat prints beside an added p99: it must cover the true difference, leave
// out zero when two targets are well apart, and be wide when a handful of slow samples decide
// the p99, as they do for 200 streams on this machine.

/** `count` samples around `center`, spread by ±`spread`, from a seeded generator. */
function samples(count: number, center: number, spread: number, seed: number): number[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => center + (random() * 2 - 1) * spread);
}

describe('added-percentile intervals', () => {
  it('covers zero for two samples of the same distribution', () => {
    const [low, high] = addedPercentileInterval(samples(1000, 1, 0.2, 1), samples(1000, 1, 0.2, 2), 0.99);
    assert.ok(low < 0 && high > 0, `[${low}, ${high}]`);
  });

  it('covers the shift and leaves out zero when the target is slower throughout', () => {
    const base = samples(1000, 1, 0.2, 3);
    const target = base.map((value) => value + 0.5);
    const [low, high] = addedPercentileInterval(target, base, 0.99);
    assert.ok(low > 0.2 && low <= 0.5 && high >= 0.5, `[${low}, ${high}]`);
    assert.ok(Math.abs(percentile(target, 0.99) - percentile(base, 0.99) - 0.5) < 1e-9);
  });

  it('is wide when three slow samples in 200 decide the p99', () => {
    const base = samples(200, 1, 0.1, 4);
    // Three of 200 met a 4 ms hiccup: the p99 is the third slowest, so it lands on one of them.
    const target = [...samples(197, 1.2, 0.1, 5), 5, 5.2, 5.4];
    const [low, high] = addedPercentileInterval(target, base, 0.99);
    assert.ok(low < 1, `lower end ${low}: resamples with fewer slow streams read a small figure`);
    assert.ok(high > 3.5, `upper end ${high}`);
    assert.ok(percentile(target, 0.99) - percentile(base, 0.99) > 3.5, 'the figure itself reads the hiccup');
  });

  it('gives the same interval for the same samples and seed', () => {
    const base = samples(300, 1, 0.3, 6);
    const target = samples(300, 1.4, 0.5, 7);
    assert.deepEqual(addedPercentileInterval(target, base, 0.99), addedPercentileInterval(target, base, 0.99));
    assert.deepEqual(addedPercentileInterval([], base, 0.99).map(Number.isNaN), [true, true]);
  });
});
