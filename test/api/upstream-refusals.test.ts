import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { request } from 'undici';
import { startApiBeforeUpstream, type OpenAiStack } from '../helpers/openai-stack.ts';
import { startScriptedChat, type ScriptedChat } from '../helpers/scripted-chat-upstream.ts';

// An upstream's refusals as callers get them: a 4xx about the request passed on in the
// gateway's error body, a 429 and a 5xx in the gateway's own words (the provider's name the
// operator's account), Retry-After kept, and `x-should-retry: false` where a retry cannot help;
// an upstream nobody answers is a 503 after the gateway's own retries. None of it is billed.

describe('chat refused by a scripted upstream', () => {
  let scripted: ScriptedChat;
  let stack: OpenAiStack;
  let client: OpenAI;
  let accountId: string;
  before(async () => {
    scripted = await startScriptedChat('upstream-refusals');
    ({ stack, client, accountId } = scripted);
  });
  after(() => scripted.close());

  it('passes 4xx refusals on in the gateway\'s error body, and 429s and 5xx in its own words, keeping Retry-After', async () => {
    const before = await stack.settledAccount(accountId);
    const refused = await request(`${stack.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${client.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'refuse' }] }),
    });
    assert.equal(refused.statusCode, 400);
    assert.deepEqual(await refused.body.json(), { error: { message: 'logit_bias is malformed', type: 'invalid_request_error', code: 'invalid_request', param: 'logit_bias' } });

    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'slow down' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.RateLimitError);
      assert.equal(error.headers?.get('retry-after'), '7');
      // The provider's words name the operator's organisation and limits: the caller gets ours.
      assert.match(error.message, /rate limiting calls to this model right now; nothing was charged\. Retry after 7 s\./);
      assert.doesNotMatch(error.message, /org-Operator123|Limit 500|2024-07-18/);
      return true;
    });

    // A wait given only in milliseconds (retry-after-ms) is kept, and given in whole seconds too.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'slow down briefly' }] }, { maxRetries: 0 }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.RateLimitError);
      assert.equal(error.headers?.get('retry-after-ms'), '1500');
      assert.equal(error.headers?.get('retry-after'), '2');
      assert.match(error.message, /Retry after 2 s\./);
      return true;
    });

    // The operator's account with the provider is out of credit: no rate limit to wait out.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'no quota' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError, String(error));
      assert.equal(error.status, 502);
      assert.match(error.message, /out of quota, which the operator must fix/);
      assert.equal(error.headers?.get('x-should-retry'), 'false', 'the SDK is told not to retry');
      return true;
    });

    // A 409 keeps its status and words, and the SDKs, which retry a 409 of their own accord,
    // are told not to: spec 7 rule 3, no retry below 500.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'conflict' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.ConflictError, String(error));
      assert.equal(error.message, '409 Another request with these parameters is in progress.');
      assert.equal(error.headers?.get('x-should-retry'), 'false');
      return true;
    });

    // A proxy's error page in front of the provider stays out of the answer.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'provider down' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError, String(error));
      assert.equal(error.status, 502);
      assert.match(error.message, /^502 The model provider failed \(503\)\. Nothing was charged; retry with backoff\.$/);
      return true;
    });

    // The caller's key is fine; the gateway's upstream key is not: a gateway fault.
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'bad credentials' }] }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError);
      assert.equal(error.status, 502);
      assert.equal(error.headers?.get('x-should-retry'), 'false');
      return true;
    });
    const after = await stack.settledAccount(accountId);
    assert.equal(after.balance_micros, before.balance_micros);
    assert.equal(after.held_micros, 0);
  });
});

describe('chat with an unreachable upstream', () => {
  it('answers 503 after retrying, and bills nothing', async () => {
    // Port 1, where nothing listens: a free port picked from the ephemeral range could be taken
    // by another test file's server before the call (it answered 502 once, in a full run).
    const stack = await startApiBeforeUpstream('chat-unreachable', 'http://127.0.0.1:1');
    try {
      const caller = await stack.newCaller('unreachable');
      const started = Date.now();
      await assert.rejects(stack.client(caller.key).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'anyone?' }] }), (error: unknown) => {
        assert.ok(error instanceof OpenAI.InternalServerError);
        assert.equal(error.status, 503);
        assert.match(error.message, /unreachable right now \(ECONNREFUSED\)/);
        // The upstream's address is the gateway's internals.
        assert.doesNotMatch(error.message, /127\.0\.0\.1|:1\b/);
        return true;
      });
      // Two retries with 50 and 100 ms pauses happened before giving up.
      assert.ok(Date.now() - started >= 150);
      const account = await stack.settledAccount(caller.accountId);
      assert.equal(account.balance_micros, 10_000_000);
      assert.equal(account.held_micros, 0);
    } finally {
      await stack.close();
    }
  });
});
