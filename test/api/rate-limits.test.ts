import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { buildApp } from '../../api/app.ts';
import { loadCatalog } from '../../core/catalog.ts';
import { adminHeaders, bearer } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { awayFromMinuteEdge } from '../helpers/minute-window.ts';

// Per-key limits per UTC minute, shared by API processes through the store: the request
// headers on every answer, 429 with Retry-After past the limit, two API processes on one store
// together within the limit, operator overrides per account and per key, and chat tokens.

const REQUESTS_PER_MINUTE = 20;

describe('rate limits', () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('rate-limits', { RATE_LIMIT_REQUESTS_PER_MINUTE: String(REQUESTS_PER_MINUTE), RATE_LIMIT_TOKENS_PER_MINUTE: '60' });
  });
  after(() => stack.close());

  it('reports the limit on every answer and refuses past it with 429 and Retry-After', async () => {
    const caller = await stack.newCaller('burst');
    await awayFromMinuteEdge();
    const statuses: number[] = [];
    const remaining: number[] = [];
    let refusal: Awaited<ReturnType<typeof stack.app.inject>> | undefined;
    for (let index = 0; index < REQUESTS_PER_MINUTE + 3; index++) {
      const response = await stack.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(caller.key) });
      statuses.push(response.statusCode);
      assert.equal(response.headers['x-ratelimit-limit-requests'], String(REQUESTS_PER_MINUTE));
      assert.match(String(response.headers['x-ratelimit-reset-requests']), /^\d+s$/);
      remaining.push(Number(response.headers['x-ratelimit-remaining-requests']));
      if (response.statusCode === 429) refusal ??= response;
    }
    assert.deepEqual(statuses, [...Array(REQUESTS_PER_MINUTE).fill(200), 429, 429, 429]);
    assert.deepEqual(remaining.slice(0, REQUESTS_PER_MINUTE), Array.from({ length: REQUESTS_PER_MINUTE }, (_unused, index) => REQUESTS_PER_MINUTE - 1 - index));
    assert.equal(remaining.at(-1), 0);
    const retryAfter = Number(refusal!.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `retry-after ${retryAfter}`);
    assert.deepEqual(Object.keys(refusal!.json().error).sort(), ['code', 'message', 'type']);
    assert.equal(refusal!.json().error.code, 'rate_limit_exceeded');
    assert.equal(refusal!.json().error.type, 'rate_limit_error');
  });

  it('holds two API processes on one store to the limit together', async () => {
    const second = await buildApp({ config: stack.config, catalog: loadCatalog(stack.config.CATALOG_FILE, { SIMULATOR_URL: stack.simulatorUrl }), database: stack.database, temporal: stack.temporal, logger: false });
    try {
      const caller = await stack.newCaller('shared');
      await awayFromMinuteEdge();
      const apps = [stack.app, second];
      const statuses = await Promise.all(
        Array.from({ length: 60 }, async (_unused, index) => (await apps[index % 2]!.inject({ method: 'GET', url: '/v1/models', headers: bearer(caller.key) })).statusCode),
      );
      const admitted = statuses.filter((status) => status === 200).length;
      assert.equal(admitted + statuses.filter((status) => status === 429).length, 60);
      // Never more than the limit; at most one partly used block (2 requests) stranded per process.
      assert.ok(admitted <= REQUESTS_PER_MINUTE, `admitted ${admitted}`);
      assert.ok(admitted >= REQUESTS_PER_MINUTE - 2 * 1, `admitted ${admitted}`);
    } finally {
      await second.close();
    }
  });

  it('applies an operator\'s overrides, the key\'s over the account\'s', async () => {
    const caller = await stack.newCaller('overrides');
    const keyId = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${caller.accountId}`, headers: adminHeaders })).json().keys[0].id as string;
    const setAccount = await stack.app.inject({ method: 'PUT', url: `/admin/accounts/${caller.accountId}/rate-limits`, headers: adminHeaders, payload: { requests_per_minute: 5 } });
    assert.deepEqual(setAccount.json(), { requests_per_minute: 5, tokens_per_minute: null });
    await awayFromMinuteEdge();
    const first = await stack.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(caller.key) });
    assert.equal(first.headers['x-ratelimit-limit-requests'], '5');

    const setKey = await stack.app.inject({ method: 'PUT', url: `/admin/keys/${keyId}/rate-limits`, headers: adminHeaders, payload: { requests_per_minute: 2 } });
    assert.equal(setKey.statusCode, 200);
    // The key's 2 apply to the minute, which already had one call.
    const statuses: number[] = [];
    for (let index = 0; index < 3; index++) statuses.push((await stack.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(caller.key) })).statusCode);
    assert.deepEqual(statuses, [200, 429, 429]);

    for (const [url, payload, status] of [
      [`/admin/keys/${keyId}/rate-limits`, { requests_per_minute: 0 }, 400],
      [`/admin/keys/${keyId}/rate-limits`, { requests_per_minute: 1.5 }, 400],
      [`/admin/keys/${keyId}/rate-limits`, { burst: 3 }, 400],
      ['/admin/keys/key_missing/rate-limits', { requests_per_minute: 3 }, 404],
      ['/admin/accounts/acct_missing/rate-limits', { requests_per_minute: 3 }, 404],
    ] as const) {
      const response = await stack.app.inject({ method: 'PUT', url, headers: adminHeaders, payload });
      assert.equal(response.statusCode, status, `${url} ${JSON.stringify(payload)}`);
      // In the gateway's words, not zod's ("Too small: expected number to be >0").
      if ('requests_per_minute' in payload && status === 400) assert.match(response.json().error.message, /must be a whole number from 1 to 1000000000, or null to clear the override/);
    }
    const anonymous = await stack.app.inject({ method: 'PUT', url: `/admin/keys/${keyId}/rate-limits`, payload: { requests_per_minute: 3 } });
    assert.equal(anonymous.statusCode, 401);
  });

  it('refuses to set a revoked key\'s limits with 409, as it does its models', async () => {
    const caller = await stack.newCaller('revoked-limits');
    const keyId = (await stack.app.inject({ method: 'GET', url: `/admin/accounts/${caller.accountId}`, headers: adminHeaders })).json().keys[0].id as string;
    assert.equal((await stack.app.inject({ method: 'DELETE', url: `/admin/keys/${keyId}`, headers: adminHeaders })).statusCode, 200);
    const refused = await stack.app.inject({ method: 'PUT', url: `/admin/keys/${keyId}/rate-limits`, headers: adminHeaders, payload: { requests_per_minute: 3 } });
    assert.equal(refused.statusCode, 409);
    assert.equal(refused.json().error.code, 'conflict');
    assert.match(refused.json().error.message, new RegExp(`The key '${keyId}' is revoked: it makes no calls, and its limits were not changed\\.`));
    assert.equal((await stack.app.inject({ method: 'GET', url: `/admin/keys/${keyId}`, headers: adminHeaders })).json().rate_limits.requests_per_minute, null, 'nothing written');
  });

  it('limits chat tokens per minute, with the token headers, as the openai client sees them', async () => {
    const caller = await stack.newCaller('tokens');
    await awayFromMinuteEdge();
    const client = stack.client(caller.key);
    const first = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'count my tokens please' }] }).withResponse();
    assert.equal(first.response.headers.get('x-ratelimit-limit-tokens'), '60');
    // Less the call's own prompt estimate, counted when it was admitted.
    const leftByFirst = Number(first.response.headers.get('x-ratelimit-remaining-tokens'));
    assert.ok(leftByFirst > 30 && leftByFirst < 60, `remaining ${leftByFirst}`);
    assert.ok(first.response.headers.get('x-ratelimit-remaining-requests'));
    const used = first.data.usage!.total_tokens;
    assert.ok(used > 0 && used < 60, `a call used ${used} tokens`);

    // Streams carry the headers too (the reply is written by hand there).
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'count my tokens please' }] }).withResponse();
    assert.ok(Number(stream.response.headers.get('x-ratelimit-remaining-tokens')) < 60);
    for await (const _chunk of stream.data);

    let refused: InstanceType<typeof OpenAI.RateLimitError> | undefined;
    for (let index = 0; index < 10 && !refused; index++) {
      try {
        await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'count my tokens please' }] });
      } catch (error) {
        assert.ok(error instanceof OpenAI.RateLimitError, String(error));
        refused = error;
      }
    }
    assert.ok(refused, 'the token limit never refused a call');
    assert.equal(refused.headers?.get('x-ratelimit-limit-tokens'), '60');
    assert.equal(refused.headers?.get('x-ratelimit-remaining-tokens'), '0');
    assert.match(refused.message, /60 tokens per minute/);
  });

  it('counts a chat call\'s prompt when it is admitted, so calls made together stay within the token limit', async () => {
    const caller = await stack.newCaller('token-burst');
    await awayFromMinuteEdge();
    const chat = (content: string) =>
      stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(caller.key), payload: { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] } });
    // Each call's prompt is estimated at about 23 tokens, so a minute of 60 admits 3 of them
    // (the third overshooting by its own size). Counted only once the upstream reported usage,
    // all 12 were admitted.
    const answers = await Promise.all(Array.from({ length: 12 }, () => chat('count my tokens please')));
    const statuses = answers.map((answer) => answer.statusCode);
    const admitted = statuses.filter((status) => status === 200).length;
    assert.equal(admitted + statuses.filter((status) => status === 429).length, 12, statuses.join());
    assert.ok(admitted >= 2 && admitted <= 4, `admitted ${admitted} of 12: ${statuses.join()}`);
  });

  it('refuses at once, and for good, a chat call whose prompt alone is more than the whole minute', async () => {
    const caller = await stack.newCaller('token-too-large');
    await awayFromMinuteEdge();
    // The minute is fresh, so before, the call was admitted and overdrew it alone. The SDK
    // would retry a 429 twice: x-should-retry tells it none would ever pass.
    let attempts = 0;
    const client = new OpenAI({
      baseURL: `${stack.baseUrl}/v1`,
      apiKey: caller.key,
      maxRetries: 2,
      fetch: (url, init) => {
        attempts++;
        return fetch(url, init);
      },
    });
    const long = 'word '.repeat(80);
    const refused = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: long }] }).then(
      () => assert.fail('a prompt of 400 characters was admitted under a limit of 60 tokens a minute'),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.equal(attempts, 1);
    assert.equal(refused.headers?.get('x-should-retry'), 'false');
    assert.match(refused.message, /Request too large: its prompt is at least about \d+ tokens, and this key may use 60 tokens per minute/);
    // Nothing was counted: the minute is whole for a call that fits.
    const next = await stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(caller.key), payload: { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(next.statusCode, 200, next.body);
    const remaining = Number(next.headers['x-ratelimit-remaining-tokens']);
    assert.ok(remaining > 30 && remaining < 60, `remaining ${remaining}`);
  });

  it('judges a prompt too large by the least it can cost: an image held at its worst case is admitted', async () => {
    const caller = await stack.newCaller('token-image');
    await awayFromMinuteEdge();
    // gpt-4o-mini holds an image at 48,200 tokens, 800 times this key's minute; its text is a
    // few tokens. The provider may bill far fewer (a low-detail image), so it is tried.
    const answer = await stack.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: bearer(caller.key),
      payload: { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'https://images.example/fox.png', detail: 'low' } }] }] },
    });
    assert.notEqual(answer.statusCode, 429, answer.body);
    assert.doesNotMatch(answer.body, /Request too large/);
  });

  it('counts the prompt, not the output limit, when it admits a chat call', async () => {
    const caller = await stack.newCaller('token-output-limit');
    await awayFromMinuteEdge();
    const answer = await stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(caller.key), payload: { model: 'gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(answer.statusCode, 200, answer.body);
    // About 20 tokens of prompt estimate; with the 50 of its output limit, nothing would be left.
    const remaining = Number(answer.headers['x-ratelimit-remaining-tokens']);
    assert.ok(remaining > 30 && remaining < 60, `remaining ${remaining}`);
  });

  it('gives back the count of a chat call that failed upstream', async () => {
    const caller = await stack.newCaller('token-failure');
    await awayFromMinuteEdge();
    const chat = (content: string) =>
      stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(caller.key), payload: { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] } });
    // Three bodies of one length, so one prompt estimate: the first call's header shows it.
    const first = await chat('fine [sim:delay_ms=0]');
    assert.equal(first.statusCode, 200);
    const estimate = 60 - Number(first.headers['x-ratelimit-remaining-tokens']);
    const used = first.json().usage.total_tokens;
    assert.ok(estimate > 0 && used > 0, `estimate ${estimate}, used ${used}`);
    const failed = await chat('fail [sim:error=500]');
    assert.equal(failed.statusCode, 502, failed.body);
    const last = await chat('fine [sim:delay_ms=0]');
    assert.equal(last.statusCode, 200, last.body);
    // The first call counts what it used, the failed one nothing, the last its estimate.
    assert.equal(Number(last.headers['x-ratelimit-remaining-tokens']), 60 - used - estimate);
  });
});
