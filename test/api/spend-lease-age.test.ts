import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// SPEND_LEASE_MAX_AGE_MS: a lease that keeps serving calls is replaced once it is that old, so
// its calls reach the ledger (one capture per lease) while the account stays busy. Idle times
// are a minute here: only the age can settle a lease within the test.

describe('SPEND_LEASE_MAX_AGE_MS', () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('lease-age', { SPEND_LEASE_MAX_AGE_MS: '300', SPEND_LEASE_IDLE_MS: '60000', SPEND_LEASE_SMALL_IDLE_MS: '60000' });
  });
  after(() => stack.close());

  it('replaces a busy lease once it is that old, well before the default 5 s', async () => {
    const caller = await stack.newCaller('lease-age');
    const client = stack.client(caller.key);
    const started = Date.now();
    let calls = 0;
    while (Date.now() - started < 1_500) {
      await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `call ${calls}` }] });
      calls++;
    }
    // Under the default age (5 s from the lease's opening, after `started`) and a minute's idle
    // time, nothing would settle before 5 s: the rest of that is left for a loaded store.
    let captures = 0;
    while (captures === 0 && Date.now() - started < 4_800) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      captures = (await stack.ledgerEntries(caller.accountId)).filter((entry) => entry.operation === 'capture').length;
    }
    assert.ok(calls > 3, `${calls} calls`);
    assert.ok(captures >= 1, `no lease settled within ${Date.now() - started} ms of the first call`);
  });
});
