import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '../../core/api-keys.ts';

describe('API key format', () => {
  it('generates fg_ keys with a checksum that detects any single-character change', () => {
    const { plaintext, hash, prefix, last4 } = generateApiKey();
    assert.match(plaintext, /^fg_[0-9A-Za-z]{49}$/);
    assert.ok(isWellFormedApiKey(plaintext));
    assert.equal(hash, hashApiKey(plaintext));
    assert.equal(hash.length, 64);
    assert.equal(prefix, plaintext.slice(0, 8));
    assert.equal(last4, plaintext.slice(-4));
    for (let position = 3; position < plaintext.length; position++) {
      const replacement = plaintext[position] === 'a' ? 'b' : 'a';
      const altered = plaintext.slice(0, position) + replacement + plaintext.slice(position + 1);
      assert.equal(isWellFormedApiKey(altered), false, `change at ${position} went unnoticed`);
    }
  });

  it('generates distinct keys', () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey().plaintext));
    assert.equal(keys.size, 200);
  });

  it('rejects foreign shapes', () => {
    for (const text of ['', 'fg_', 'sk-abc', `fg_${'a'.repeat(48)}`, `xx_${'a'.repeat(49)}`]) {
      assert.equal(isWellFormedApiKey(text), false, text);
    }
  });
});
