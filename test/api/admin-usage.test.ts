import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, createKey } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// GET /admin/accounts/{id}/usage: per key and per day, the same figures the ledger and the
// usage records hold (nothing for a range before the calls or reversed), and refusals for an
// unknown account and a day that does not exist.

describe('admin: account usage', () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('admin-usage');
  });
  after(() => stack.close());

  const usage = (accountId: string, query = '') => stack.app.inject({ method: 'GET', url: `/admin/accounts/${accountId}/usage${query}`, headers: adminHeaders });

  it('reports requests, tokens and spend per key and per day, adding up to what was charged', async () => {
    const caller = await stack.newCaller('usage-report');
    const second = await createKey(stack.app, caller.accountId);
    const answers = [];
    for (const key of [caller.key, caller.key, second.key]) {
      answers.push(await stack.client(key).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'count me' }] }));
    }
    const settled = await stack.settledAccount(caller.accountId);
    await stack.usageRecords(caller.accountId, 2);

    const today = new Date().toISOString().slice(0, 10);
    const response = await usage(caller.accountId, `?from=${today}&to=${today}`);
    assert.equal(response.statusCode, 200, response.body);
    const report = response.json();
    assert.equal(report.account_id, caller.accountId);
    assert.deepEqual([report.from, report.to], [today, today]);
    assert.equal(report.totals.requests, 3);
    assert.equal(report.totals.input_tokens, answers.reduce((sum, answer) => sum + answer.usage!.prompt_tokens, 0));
    assert.equal(report.totals.output_tokens, answers.reduce((sum, answer) => sum + answer.usage!.completion_tokens, 0));
    assert.equal(report.totals.spend_usd, settled.spent_micros / 1_000_000);
    const byKey = new Map(report.keys.map((row: { key_id: string; requests: number }) => [row.key_id, row.requests]));
    assert.equal(byKey.get(second.id), 1);
    assert.equal([...byKey.values()].reduce((sum: number, requests) => sum + (requests as number), 0), 3);
    assert.deepEqual(report.days.map((row: { day: string }) => row.day), [today]);

    for (const query of ['?to=2020-01-01', `?from=${today}&to=2020-01-01`]) {
      const empty = await usage(caller.accountId, query);
      assert.equal(empty.statusCode, 200, query);
      assert.deepEqual([empty.json().totals.requests, empty.json().keys, empty.json().days], [0, [], []], query);
    }
  });

  it('refuses an unknown account, a day that does not exist, an unknown parameter, and no token', async () => {
    const caller = await stack.newCaller('usage-refusals');
    assert.equal((await usage('acct_nobody')).statusCode, 404);
    for (const query of ['?from=2025-02-31', '?to=2025-13-01', '?from=yesterday', '?to=2025-02-29']) {
      const refused = await usage(caller.accountId, query);
      assert.equal(refused.statusCode, 400, query);
      assert.equal(refused.json().error.type, 'invalid_request_error', query);
    }
    const repeated = await usage(caller.accountId, '?from=2025-01-01&from=2025-01-02');
    assert.equal(repeated.statusCode, 400);
    assert.match(repeated.json().error.message, /must be given once, as a date like 2025-01-31/);
    // A misspelt parameter is named, not ignored (which answered every day).
    const misspelt = await usage(caller.accountId, '?since=2025-01-01');
    assert.equal(misspelt.statusCode, 400);
    assert.deepEqual([misspelt.json().error.param, misspelt.json().error.message], ['since', "Unknown query parameter 'since': this endpoint does not take it."]);
    const anonymous = await stack.app.inject({ method: 'GET', url: `/admin/accounts/${caller.accountId}/usage` });
    assert.equal(anonymous.statusCode, 401);
  });
});
