import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { startApiBeforeUpstream, startFakeUpstream, type OpenAiStack } from '../helpers/openai-stack.ts';
import { answerScripted, UPSTREAM_MODEL } from '../helpers/scripted-chat-upstream.ts';

// A random int64 seed (Python's random.getrandbits(63), say) must reach the upstream as the
// caller wrote it: parsed into a number it becomes 9223372036854775808, beyond int64, and the
// upstream refuses a request the caller wrote correctly.

const SEED = '9223372036854775807';
const VENDOR_IDS = '[-9223372036854775808,18446744073709551615]';

describe('integers beyond a number, passed through', () => {
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  let key: string;
  before(async () => {
    upstream = await startFakeUpstream(answerScripted);
    stack = await startApiBeforeUpstream('verbatim-integers', upstream.url, { upstreamChatModel: UPSTREAM_MODEL });
    ({ key } = await stack.newCaller('verbatim'));
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  const post = (path: string, body: string) =>
    request(`${stack.baseUrl}/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });

  for (const stream of [false, true]) {
    it(`reach the upstream as written in a chat completion${stream ? ' stream' : ''}`, async () => {
      const answer = await post('/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"count 12345678901234567890"}],"seed":${SEED},"vendor_ids":${VENDOR_IDS},"stream":${stream}}`);
      assert.equal(answer.statusCode, 200);
      await answer.body.text();
      const sent = upstream.received.at(-1)!;
      assert.ok(sent.text.includes(`"seed":${SEED}`), sent.text);
      assert.ok(sent.text.includes(`"vendor_ids":${VENDOR_IDS}`), sent.text);
      // Digits inside text stay text.
      assert.equal(sent.body.messages[0].content, 'count 12345678901234567890');
      assert.equal(sent.body.model, UPSTREAM_MODEL);
    });
  }

  it('reach the upstream as written in an image generation', async () => {
    const answer = await post('/images/generations', `{"model":"gpt-image-1","prompt":"a fox","n":1,"seed":${SEED}}`);
    assert.equal(answer.statusCode, 200);
    await answer.body.text();
    const sent = upstream.received.at(-1)!;
    assert.equal(sent.path, '/v1/images/generations');
    assert.ok(sent.text.includes(`"seed":${SEED}`), sent.text);
  });

  // Each was a 400 before such integers were kept, and must stay one: a field the gateway
  // checks takes neither the integer nor a string standing in for it.
  const refusals: [string, string, string][] = [
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":99999999999999999999}', 'max_tokens'],
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"n":99999999999999999999}', 'n'],
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":99999999999999999999}]}', 'messages.0.content'],
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stop":99999999999999999999}', 'stop'],
    ['/chat/completions', '{"model":99999999999999999999,"messages":[{"role":"user","content":"hi"}]}', 'model'],
    ['/images/generations', '{"model":"gpt-image-1","prompt":99999999999999999999}', 'prompt'],
  ];
  for (const [path, body, param] of refusals) {
    it(`refuse ${param} that large on ${path}, naming it, with nothing of the stand-in shown`, async () => {
      const before = upstream.received.length;
      const answer = await post(path, body);
      assert.equal(answer.statusCode, 400);
      const { error } = (await answer.body.json()) as { error: { param: string; message: string } };
      assert.equal(error.param, param);
      assert.doesNotMatch(error.message, /fg-integer/);
      assert.equal(upstream.received.length, before, 'nothing reached the upstream');
    });
  }

  it('say an output limit that large is too large, and one that negative is no positive integer', async () => {
    for (const [literal, said] of [['99999999999999999999', /^Invalid field 'max_tokens': must be at most \d+, the most output tokens a model here makes$/], ['-99999999999999999999', /^Invalid field 'max_tokens': must be a positive integer$/]] as const) {
      const answer = await post('/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":${literal}}`);
      assert.equal(answer.statusCode, 400);
      assert.match(((await answer.body.json()) as { error: { message: string } }).error.message, said);
    }
  });

  // JSON.parse reads 1e400 as Infinity, which JSON.stringify writes as null: passed on, the
  // parameter reached the upstream as null.
  const overflows: [string, string, string][] = [
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"x":1e400}', 'x'],
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"logit_bias":{"50256":-1E+999}}', 'logit_bias.50256'],
    ['/chat/completions', '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":1e309}', 'temperature'],
    ['/images/generations', `{"model":"gpt-image-1","prompt":"a fox","extra":[1,${'9'.repeat(400)}.5]}`, 'extra.1'],
    ['/video/generations', '{"model":"seedance-1.0-pro","prompt":"a fox","metadata":{"x":1e999}}', 'metadata.x'],
    // Past the range without an exponent of three digits, or 309 digits in a row.
    ['/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"a":1${'0'.repeat(300)}e10}`, 'a'],
    ['/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"b":[${'9'.repeat(250)}.5e99]}`, 'b.0'],
  ];
  for (const [path, body, param] of overflows) {
    it(`refuse a number past a double's range in ${param} on ${path}, naming it`, async () => {
      const before = upstream.received.length;
      const answer = await post(path, body);
      assert.equal(answer.statusCode, 400);
      const { error } = (await answer.body.json()) as { error: { param: string; message: string; code: string } };
      assert.equal(error.param, param);
      assert.equal(error.code, 'invalid_request');
      assert.match(error.message, /too large for a double/);
      assert.equal(upstream.received.length, before, 'nothing reached the upstream');
    });
  }

  it('read a body of long digit runs in time linear in its size', async () => {
    // 2 MB of 308-digit runs: a regex for 309 digits in a row on the text took about 2 s of
    // the api's CPU on such a body (for every caller of the process, with or without a key).
    const digits = `${'1'.repeat(308)} `.repeat(6_800);
    const started = process.cpuUsage();
    const answer = await post('/chat/completions', `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}],"x":"${digits}"}`);
    const cpu = process.cpuUsage(started);
    assert.equal(answer.statusCode, 404);
    await answer.body.text();
    const cpuMs = (cpu.user + cpu.system) / 1_000;
    assert.ok(cpuMs < 700, `the body took ${cpuMs} ms of CPU`);
  });

  it('pass on numbers within a double\'s range, however written, and an integer of 400 digits as written', async () => {
    const huge = '1'.repeat(400);
    const answer = await post('/chat/completions', `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"E123 e999"}],"a":1e308,"b":1e-400,"c":${huge}}`);
    assert.equal(answer.statusCode, 200);
    await answer.body.text();
    const sent = upstream.received.at(-1)!;
    assert.equal(sent.body.a, 1e308);
    assert.equal(sent.body.b, 0);
    assert.ok(sent.text.includes(`"c":${huge}`), sent.text.slice(0, 300));
  });
});
