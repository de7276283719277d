import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalJson } from '../../api/plugins/idempotency.ts';
import { parseKeepingUnsafeIntegers, restoreUnsafeIntegers, VerbatimInteger } from '../../core/verbatim-integers.ts';

// What JSON.parse then JSON.stringify would do to a body, against what the gateway does.
const throughParse = (text: string) => JSON.stringify(JSON.parse(text));
const throughGateway = (text: string) => restoreUnsafeIntegers(JSON.stringify(parseKeepingUnsafeIntegers(text) ?? JSON.parse(text)));

describe('integers a number cannot hold', () => {
  it('come back as written, where a plain parse changes them', () => {
    const body = '{"seed":9223372036854775807,"ids":[-9223372036854775808,18446744073709551615],"n":{"deep":[12345678901234567890]}}';
    assert.notEqual(throughParse(body), body);
    assert.equal(throughGateway(body), body);
  });

  it('are parsed as VerbatimIntegers, neither numbers nor strings, so no schema for either takes them', () => {
    const parsed = parseKeepingUnsafeIntegers('{"seed":9223372036854775807,"safe":42}') as Record<string, unknown>;
    assert.ok(parsed.seed instanceof VerbatimInteger);
    assert.equal((parsed.seed as VerbatimInteger).literal, '9223372036854775807');
    assert.equal(parsed.safe, 42);
  });

  it('leave safe integers, fractions, exponents and strings of digits alone', () => {
    const body = '{"a":9007199254740991,"b":-9007199254740991,"c":12345678901234567890.5,"d":1.2345678901234567e25,"e":"12345678901234567890","f":"say \\"99999999999999999999\\" twice"}';
    assert.equal(parseKeepingUnsafeIntegers(body), undefined);
    assert.equal(throughGateway(body), throughParse(body));
  });

  it('are found after a string that ends in an escaped backslash', () => {
    const body = '{"path":"C:\\\\","seed":99999999999999999999}';
    assert.ok((parseKeepingUnsafeIntegers(body) as { seed: unknown }).seed instanceof VerbatimInteger);
    assert.equal(throughGateway(body), body);
  });

  it('leave a caller string that looks like a stand-in as the string it is', () => {
    const body = '{"content":"fg-integer-0000000000000000:123","seed":99999999999999999999}';
    assert.equal(throughGateway(body), body);
  });

  it('give the same idempotency fingerprint as written, whatever the process', () => {
    // The stand-in in JSON text is random per process: a retry on another api process must
    // still match the first attempt's fingerprint.
    assert.equal(canonicalJson(parseKeepingUnsafeIntegers('{"seed":9223372036854775807,"a":[1]}')), '{"a":[1],"seed":9223372036854775807}');
  });

  it('leave a body without 16 digits in a row alone', () => {
    assert.equal(parseKeepingUnsafeIntegers('{"messages":[{"role":"user","content":"hi"}],"seed":42}'), undefined);
    const plain = '{"max_tokens":100}';
    assert.equal(restoreUnsafeIntegers(plain), plain);
  });
});
