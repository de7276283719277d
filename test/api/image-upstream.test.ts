import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startApiBeforeUpstream, startFakeUpstream, type OpenAiStack } from '../helpers/openai-stack.ts';

// What an image call hands the provider and takes back from it, against a scripted provider:
// three findings of a review of the image path. The prompt went out trimmed, gpt-image-1's
// safety refusal lost its code, and an answer led by a byte order mark became a 502 after the
// provider had made (and charged for) the images.

let answer: (response: ServerResponse) => void = () => undefined;

const images = (count: number) => JSON.stringify({ created: 1, data: Array.from({ length: count }, (_, index) => ({ url: `https://images.example/${index}.png` })) });

describe('an image call against a scripted provider', () => {
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  before(async () => {
    upstream = await startFakeUpstream((_recorded, response) => answer(response));
    stack = await startApiBeforeUpstream('image-upstream', upstream.url);
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  it('sends the prompt as the caller wrote it, spaces included', async () => {
    answer = (response) => response.writeHead(200, { 'content-type': 'application/json' }).end(images(1));
    const caller = await stack.newCaller('prompt-as-written');
    const sentBefore = upstream.received.length;
    await stack.client(caller.key).images.generate({ model: 'gpt-image-1', prompt: '  a kite\n' });
    assert.equal(upstream.received[sentBefore]!.body.prompt, '  a kite\n');
  });

  it("keeps gpt-image-1's code for a prompt its safety system refused, unbilled", async () => {
    answer = (response) =>
      response
        .writeHead(400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: 'Your request was rejected by the safety system.', type: 'image_generation_user_error', param: null, code: 'moderation_blocked' } }));
    const caller = await stack.newCaller('moderation');
    await assert.rejects(stack.client(caller.key).images.generate({ model: 'gpt-image-1', prompt: 'something refused' }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.code, 'moderation_blocked');
      return true;
    });
    assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, 0);
  });

  it('takes an answer led by a byte order mark, as the OpenAI clients do, and bills its images', async () => {
    answer = (response) => response.writeHead(200, { 'content-type': 'application/json' }).end(`\uFEFF${images(2)}`);
    const caller = await stack.newCaller('byte-order-mark');
    const result = await stack.client(caller.key).images.generate({ model: 'gpt-image-1', prompt: 'two kites', n: 2 });
    assert.equal(result.data?.length, 2);
    // The local catalog's gpt-image-1: $0.04 an image.
    assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, 80_000);
  });
});

describe('an image answer larger than the api reads whole', () => {
  const MAX_ANSWER_BYTES = 64 * 1024;
  let upstream: Awaited<ReturnType<typeof startFakeUpstream>>;
  let stack: OpenAiStack;
  before(async () => {
    upstream = await startFakeUpstream((_recorded, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1, data: [{ b64_json: 'A'.repeat(2 * MAX_ANSWER_BYTES) }] }));
    });
    stack = await startApiBeforeUpstream('image-upstream-too-large', upstream.url, { upstreamClient: { maxAnswerBytes: MAX_ANSWER_BYTES } });
  });
  after(async () => {
    await stack.close();
    await upstream.close();
  });

  it('is a 502 the OpenAI client does not retry into paying the provider again, unbilled', async () => {
    const caller = await stack.newCaller('too-large');
    // The client's own retries on, as a caller has them: two more tries of a 502 unless told not to.
    const client = new OpenAI({ baseURL: `${stack.baseUrl}/v1`, apiKey: caller.key, maxRetries: 2, timeout: 20_000 });
    const sentBefore = upstream.received.length;
    await assert.rejects(client.images.generate({ model: 'gpt-image-1', prompt: 'a huge kite', response_format: 'b64_json' }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError);
      assert.equal(error.status, 502);
      assert.equal(error.headers.get('x-should-retry'), 'false');
      assert.match(error.message, /was cut off; nothing was charged/);
      return true;
    });
    assert.equal(upstream.received.length - sentBefore, 1);
    assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, 0);
  });
});
