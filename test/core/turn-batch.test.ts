import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TurnBatch } from '../../core/turn-batch.ts';

// Deferred bookkeeping: handled after the turn that added it, in order, all of it, once; a
// flush handles what is pending at once; one failing item loses none of the others.

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('TurnBatch', () => {
  it('handles the items of a turn together after it, in the order added', async () => {
    const handled: number[] = [];
    const batch = new TurnBatch<number>((item) => handled.push(item));
    batch.add(1);
    batch.add(2);
    await Promise.resolve();
    assert.deepEqual(handled, [], 'nothing before the turn ends');
    await nextTurn();
    assert.deepEqual(handled, [1, 2]);
    batch.add(3);
    await nextTurn();
    assert.deepEqual(handled, [1, 2, 3], 'a later turn schedules its own');
  });

  it('flush handles what is pending at once, and nothing twice', async () => {
    const handled: string[] = [];
    const batch = new TurnBatch<string>((item) => handled.push(item));
    batch.add('a');
    batch.flush();
    assert.deepEqual(handled, ['a']);
    batch.add('b');
    await nextTurn();
    await nextTurn();
    assert.deepEqual(handled, ['a', 'b']);
  });

  it('an item that throws is reported and the rest are still handled', async () => {
    const handled: number[] = [];
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const batch = new TurnBatch<number>((item) => {
        if (item === 2) throw new Error('label missing');
        handled.push(item);
      });
      for (const item of [1, 2, 3]) batch.add(item);
      await nextTurn();
      await nextTurn();
      assert.deepEqual(handled, [1, 3]);
      assert.deepEqual(warnings, ['deferred bookkeeping failed: label missing']);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
