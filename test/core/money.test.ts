import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { microsToUsd, usdToMicros } from '../../core/money.ts';

describe('USD and micro-USD', () => {
  it('converts amounts with up to 6 decimals exactly', () => {
    assert.equal(usdToMicros(0), 0);
    assert.equal(usdToMicros(0.000001), 1);
    assert.equal(usdToMicros(0.1), 100_000);
    assert.equal(usdToMicros(12.345678), 12_345_678);
    assert.equal(usdToMicros(1_000_000), 1_000_000_000_000);
    assert.equal(microsToUsd(usdToMicros(0.1)! + usdToMicros(0.2)!), 0.3);
  });

  it('refuses more than 6 decimals and non-finite values', () => {
    for (const value of [0.0000001, 1.2345678, Number.NaN, Number.POSITIVE_INFINITY, 1e300]) {
      assert.equal(usdToMicros(value), null, String(value));
    }
  });
});
