import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { markUnsafeIntegers, restoreUnsafeIntegers } from '../../core/verbatim-integers.ts';

// What JSON.parse then JSON.stringify would do to a body, against what the gateway does.
const throughParse = (text: string) => JSON.stringify(JSON.parse(text));
const throughMarks = (text: string) => restoreUnsafeIntegers(JSON.stringify(JSON.parse(markUnsafeIntegers(text) ?? text)));

describe('integers a number cannot hold', () => {
  it('come back as written, where a plain parse changes them', () => {
    const body = '{"seed":9223372036854775807,"ids":[-9223372036854775808,18446744073709551615],"n":{"deep":[12345678901234567890]}}';
    assert.notEqual(throughParse(body), body);
    assert.equal(throughMarks(body), body);
  });

  it('leave safe integers, fractions, exponents and strings of digits as numbers and text', () => {
    const body = '{"a":9007199254740991,"b":-9007199254740991,"c":12345678901234567890.5,"d":1.2345678901234567e25,"e":"12345678901234567890","f":"say \\"99999999999999999999\\" twice"}';
    assert.equal(markUnsafeIntegers(body), undefined);
    assert.deepEqual(JSON.parse(throughMarks(body)), JSON.parse(body));
  });

  it('are found after a string that ends in an escaped backslash', () => {
    const body = '{"path":"C:\\\\","seed":99999999999999999999}';
    const marked = markUnsafeIntegers(body);
    assert.ok(marked !== undefined);
    assert.equal(typeof JSON.parse(marked).seed, 'string');
    assert.equal(throughMarks(body), body);
  });

  it('are told from a caller string that looks like a marker', () => {
    const body = '{"content":"fg-integer-0000000000000000:123","seed":99999999999999999999}';
    const restored = JSON.parse(throughMarks(body));
    assert.equal(restored.content, 'fg-integer-0000000000000000:123');
  });

  it('leave a body without 16 digits in a row alone', () => {
    assert.equal(markUnsafeIntegers('{"messages":[{"role":"user","content":"hi"}],"seed":42}'), undefined);
    const plain = '{"max_tokens":100}';
    assert.equal(restoreUnsafeIntegers(plain), plain);
  });
});
