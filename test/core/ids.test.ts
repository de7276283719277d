import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId } from '../../core/ids.ts';

test('ids are prefixed, carry 16 base64url characters and never repeat across pool refills', () => {
  const seen = new Set<string>();
  // 341 ids per pool: 5,000 ids cross the refill boundary 14 times.
  for (let index = 0; index < 5_000; index++) {
    const id = newId('req');
    assert.match(id, /^req_[A-Za-z0-9_-]{16}$/);
    seen.add(id);
  }
  assert.equal(seen.size, 5_000);
  assert.match(newId('task'), /^task_[A-Za-z0-9_-]{16}$/);
});

test('consecutive ids do not share their random part', () => {
  const parts = Array.from({ length: 1_000 }, () => newId('lease').slice('lease_'.length));
  // With 96 random bits a shared 8-character prefix (48 bits) between neighbours would mean
  // the pool handed out overlapping bytes.
  for (let index = 1; index < parts.length; index++) assert.notEqual(parts[index]!.slice(0, 8), parts[index - 1]!.slice(0, 8));
});
