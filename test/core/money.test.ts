import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { microsToUsd, usdTextToMicros, usdToMicros } from '../../core/money.ts';

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

  it('parses typed USD amounts into micro-USD without floats, refusing anything else', () => {
    assert.equal(usdTextToMicros('25'), 25_000_000);
    assert.equal(usdTextToMicros(' 0.1 '), 100_000);
    assert.equal(usdTextToMicros('12.345678'), 12_345_678);
    assert.equal(usdTextToMicros('0.000001'), 1);
    assert.equal(usdTextToMicros('9007199254.740991'), Number.MAX_SAFE_INTEGER);
    assert.equal(usdTextToMicros('9007199254.740992'), null, 'beyond exact integers');
    for (const text of ['', '1.2345678', '-1', '1e3', '$5', '1,000', '.5', '5.', 'NaN', 'Infinity']) {
      assert.equal(usdTextToMicros(text), null, text);
    }
  });
});
