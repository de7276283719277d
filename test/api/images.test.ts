import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { request } from 'undici';
import { scratchDirectory } from '../helpers/scratch-directory.ts';
import { waitUntil } from '../helpers/wait-until.ts';
import { createKey } from '../helpers/app.ts';
import { PNG_SIGNATURE, startApiBeforeUpstream, startFakeUpstream, startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// POST /v1/images/generations through the official client: real PNGs by URL or inline, billed
// per image (gpt-image-1: $0.04 each in config/catalog.local.json), refusals as the client's
// own error classes, and nothing billed for a failure.

const PRICE_PER_IMAGE = 40_000;

describe('POST /v1/images/generations through the openai client', () => {
  let stack: SimulatorStack;
  before(async () => {
    stack = await startOpenAiStack('images');
  });
  after(() => stack.close());

  it('returns downloadable PNG URLs and bills n images', async () => {
    const caller = await stack.newCaller('urls');
    const before = await stack.settledAccount(caller.accountId);
    const result = await stack.client(caller.key).images.generate({ model: 'gpt-image-1', prompt: 'a lighthouse at dusk', n: 2, size: '1024x1024', response_format: 'url' });
    assert.equal(result.data!.length, 2);
    for (const image of result.data!) {
      const download = await request(image.url!);
      assert.equal(download.statusCode, 200);
      assert.equal(download.headers['content-type'], 'image/png');
      const bytes = Buffer.from(await download.body.arrayBuffer());
      assert.deepEqual(bytes.subarray(0, 8), PNG_SIGNATURE);
    }
    const after = await stack.settledAccount(caller.accountId);
    assert.equal(before.balance_micros - after.balance_micros, 2 * PRICE_PER_IMAGE);
    assert.equal(after.spent_micros, 2 * PRICE_PER_IMAGE);
    assert.equal(after.held_micros, 0);
    const [usage] = await stack.usageRecords(caller.accountId, 1);
    assert.equal(usage!.kind, 'image');
    assert.equal(usage!.model, 'gpt-image-1');
    assert.equal(usage!.images, 2);
    assert.equal(usage!.spend_micros, 2 * PRICE_PER_IMAGE);
  });

  it('returns inline base64 PNGs', async () => {
    const caller = await stack.newCaller('b64');
    const result = await stack.client(caller.key).images.generate({ model: 'gpt-image-1', prompt: 'a red kite', response_format: 'b64_json', size: '1536x1024' });
    assert.equal(result.data!.length, 1);
    const png = Buffer.from(result.data![0]!.b64_json!, 'base64');
    assert.deepEqual(png.subarray(0, 8), PNG_SIGNATURE);
    // IHDR: width and height follow the 8-byte signature, 4-byte length and 4-byte type.
    assert.ok(png.readUInt32BE(16) > png.readUInt32BE(20), 'landscape as asked');
    assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, PRICE_PER_IMAGE);
  });

  it('bills nothing when the upstream fails, and keeps nothing held', async () => {
    const caller = await stack.newCaller('failing');
    const client = stack.client(caller.key);
    await assert.rejects(client.images.generate({ model: 'gpt-image-1', prompt: 'a storm [sim:error=500]' }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.InternalServerError);
      assert.equal(error.status, 502);
      return true;
    });
    await assert.rejects(client.images.generate({ model: 'gpt-image-1', prompt: 'a queue [sim:error=429]' }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.RateLimitError);
      assert.equal(error.headers?.get('retry-after'), '1');
      return true;
    });
    await assert.rejects(client.images.generate({ model: 'gpt-image-1', prompt: 'a riot [sim:error=400 error_code=content_policy_violation]' }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.code, 'content_policy_violation');
      return true;
    });
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.balance_micros, 10_000_000);
    assert.equal(account.held_micros, 0);
    assert.deepEqual(await stack.usageRecords(caller.accountId), []);
  });

  it('refuses with the client\'s own error classes', async () => {
    const caller = await stack.newCaller('refusals');
    const client = stack.client(caller.key);
    await assert.rejects(stack.client('fg_wrong').images.generate({ model: 'gpt-image-1', prompt: 'x' }), OpenAI.AuthenticationError);
    await assert.rejects(client.images.generate({ model: 'dall-e-9', prompt: 'x' }), OpenAI.NotFoundError);
    await assert.rejects(client.images.generate({ model: 'gpt-4o-mini', prompt: 'x' }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.match(error.message, /chat model/);
      return true;
    });
    for (const [body, field] of [
      [{ model: 'gpt-image-1', prompt: 'x', n: 11 }, 'n'],
      [{ model: 'gpt-image-1', prompt: '' }, 'prompt'],
      [{ model: 'gpt-image-1', prompt: 'x', size: 'huge' }, 'size'],
      [{ model: 'gpt-image-1', prompt: 'x', response_format: 'gif' }, 'response_format'],
      [{ model: 'gpt-image-1', prompt: 'x', stream: true, partial_images: 1 }, 'stream'],
    ] as const) {
      await assert.rejects(client.images.generate(body as OpenAI.ImageGenerateParamsNonStreaming), (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, field);
        assert.equal(error.param, field);
        return true;
      });
    }
    // Sizes and qualities gpt-image-1 does not make (OpenAI answers 400): refused before
    // anything is held or asked, never billed (a review's 13x13 and 'ultra' were billed $0.04).
    const unmade = await stack.newCaller('unmade sizes', 1);
    const unmadeClient = stack.client(unmade.key);
    for (const [body, field, message] of [
      [{ model: 'gpt-image-1', prompt: 'x', size: '13x13' }, 'size', /'size': must be one of '1024x1024', '1536x1024', '1024x1536', 'auto'/],
      [{ model: 'gpt-image-1', prompt: 'x', size: '256x256', n: 2 }, 'size', /'size': must be one of/],
      [{ model: 'gpt-image-1', prompt: 'x', quality: 'ultra' }, 'quality', /'quality': must be one of 'low', 'medium', 'high', 'auto'/],
      [{ model: 'gpt-image-1', prompt: 'x', quality: 5 }, 'quality', /'quality': must be one of/],
    ] as const) {
      await assert.rejects(unmadeClient.images.generate(body as unknown as OpenAI.ImageGenerateParamsNonStreaming), (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, field);
        assert.equal(error.param, field);
        assert.match(error.message, message);
        return true;
      });
    }
    const made = await unmadeClient.images.generate({ model: 'gpt-image-1', prompt: 'x', size: '1536x1024', quality: 'low' });
    assert.equal(made.data?.length, 1);
    assert.equal((await stack.settledAccount(unmade.accountId)).balance_micros, 1_000_000 - 40_000, 'only the one image made is billed');

    const chatOnly = await createKey(stack.app, caller.accountId, { name: 'chat only', models: ['gpt-4o-mini'] });
    await assert.rejects(stack.client(chatOnly.key).images.generate({ model: 'gpt-image-1', prompt: 'x' }), OpenAI.PermissionDeniedError);

    const poor = await stack.newCaller('poor', 0.05);
    await assert.rejects(stack.client(poor.key).images.generate({ model: 'gpt-image-1', prompt: 'x', n: 2 }), (error: unknown) => {
      assert.ok(error instanceof OpenAI.PermissionDeniedError);
      assert.equal(error.code, 'insufficient_balance');
      return true;
    });
    assert.equal((await stack.settledAccount(poor.accountId)).balance_micros, 50_000);
  });
});

describe('images priced by quality and size', () => {
  let stack: SimulatorStack;
  before(async () => {
    // gpt-image-1 as OpenAI prices it: by quality and size, auto taken at its dearest.
    const catalog = JSON.parse(await readFile('config/catalog.local.json', 'utf8')) as { models: Array<Record<string, unknown>> };
    const image = catalog.models.find((model) => model.id === 'gpt-image-1')!;
    image.prices_per_image_micros = { 'low 1024x1024': 11_000, 'high 1024x1024': 167_000, 'high 1536x1024': 250_000, 'auto 1024x1024': 167_000 };
    image.default_size = '1024x1024';
    // A second image model making fewer sizes and qualities than the first (so the document's
    // lists, all models' together, let its refusals through to the model's own check).
    catalog.models.push({ ...image, id: 'square-image', sizes: ['1024x1024'], qualities: ['low'], prices_per_image_micros: undefined, default_size: 'auto' });
    // And one that lists neither (as a catalog may): the document's fields then take any value,
    // and a call that names no quality must still pass, for every model.
    catalog.models.push({ id: 'any-image', kind: 'image', upstream: 'simulator-openai', upstream_model: 'dall-e-3', owned_by: 'openai', price_per_image_micros: 40_000 });
    const file = path.join(scratchDirectory('catalog'), 'catalog.json');
    await writeFile(file, JSON.stringify(catalog));
    stack = await startOpenAiStack('images-priced', { CATALOG_FILE: file });
  });
  after(() => stack.close());

  it('charges each image at its quality and size, and refuses a pair it has no price for', async () => {
    const caller = await stack.newCaller('priced');
    const client = stack.client(caller.key);
    await client.images.generate({ model: 'gpt-image-1', prompt: 'a kite', quality: 'low', n: 2 });
    await client.images.generate({ model: 'gpt-image-1', prompt: 'a kite', quality: 'high', size: '1536x1024' });
    await client.images.generate({ model: 'gpt-image-1', prompt: 'a kite' });
    for (const [body, field] of [
      [{ quality: 'medium' }, 'quality'],
      [{ quality: 'low', size: '1536x1024' }, 'size'],
      [{ size: '1024x1536' }, 'size'],
    ] as const) {
      await assert.rejects(client.images.generate({ model: 'gpt-image-1', prompt: 'a kite', ...body } as OpenAI.ImageGenerateParamsNonStreaming), (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, JSON.stringify(body));
        assert.equal(error.param, field, JSON.stringify(body));
        assert.match(error.message, /priced for these quality and size pairs only: "low 1024x1024", "high 1024x1024"/);
        return true;
      });
    }
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.spent_micros, 2 * 11_000 + 250_000 + 167_000);
  });

  it("refuses a size or quality another image model makes but this one does not, by this model's own list", async () => {
    const caller = await stack.newCaller('square');
    const client = stack.client(caller.key);
    for (const [body, field, message] of [
      [{ size: '1536x1024' }, 'size', "The model 'square-image' takes the size '1024x1024', not '1536x1024'."],
      [{ quality: 'high' }, 'quality', "The model 'square-image' takes the quality 'low', not 'high'."],
    ] as const) {
      await assert.rejects(client.images.generate({ model: 'square-image', prompt: 'a kite', ...body } as OpenAI.ImageGenerateParamsNonStreaming), (error: unknown) => {
        assert.ok(error instanceof OpenAI.BadRequestError, JSON.stringify(body));
        assert.equal(error.param, field);
        assert.equal(error.message, `400 ${message}`);
        return true;
      });
    }
    await client.images.generate({ model: 'square-image', prompt: 'a kite', size: '1024x1024', quality: 'low' });
    assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, 40_000);
  });

  it('takes a call without quality or size when a model of the catalog lists none, and passes any on to that model', async () => {
    const caller = await stack.newCaller('unlisted');
    const client = stack.client(caller.key);
    await client.images.generate({ model: 'square-image', prompt: 'a kite' });
    await client.images.generate({ model: 'any-image', prompt: 'a kite' });
    await client.images.generate({ model: 'any-image', prompt: 'a kite', quality: 'hd', size: '1792x1024' } as OpenAI.ImageGenerateParamsNonStreaming);
    assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, 3 * 40_000);
  });
});

describe('what a model priced by quality and size is sent', () => {
  it('sends the provider the quality and size it was priced at, the defaults included', async () => {
    const upstream = await startFakeUpstream((_recorded, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1, data: [{ url: 'https://images.example/1.png' }] }));
    });
    const stack = await startApiBeforeUpstream('images-priced-upstream', upstream.url, {
      imageModel: { prices_per_image_micros: { 'auto 1024x1024': 167_000, 'low 1536x1024': 16_000 }, default_size: '1024x1024' },
    });
    try {
      const caller = await stack.newCaller('sent');
      const client = stack.client(caller.key);
      await client.images.generate({ model: 'gpt-image-1', prompt: 'a kite' });
      await client.images.generate({ model: 'gpt-image-1', prompt: 'a kite', quality: 'low', size: '1536x1024' });
      assert.deepEqual(
        upstream.received.map((recorded) => [recorded.body.quality, recorded.body.size]),
        [
          ['auto', '1024x1024'],
          ['low', '1536x1024'],
        ],
      );
      assert.equal((await stack.settledAccount(caller.accountId)).spent_micros, 167_000 + 16_000);
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});

describe('an image call whose caller left', () => {
  it('is not sent again for nobody when the provider dropped its first try at once', async () => {
    // The first try's connection drops a moment after the provider has it (it never worked on
    // it: the gateway would send it again); the second would be answered, and charged.
    const upstream = await startFakeUpstream((_recorded, response, attempt) => {
      if (attempt === 1) setTimeout(() => response.socket?.destroy(), 300);
      else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ created: 1, data: [{ url: 'https://images.example/1.png' }] }));
    });
    const stack = await startApiBeforeUpstream('images-left-dropped', upstream.url);
    try {
      const caller = await stack.newCaller('left');
      const controller = new AbortController();
      const call = stack.client(caller.key).images.generate({ model: 'gpt-image-1', prompt: 'a kite' }, { signal: controller.signal, maxRetries: 0 });
      await waitUntil(() => upstream.received.length === 1);
      controller.abort();
      await assert.rejects(call, OpenAI.APIUserAbortError);
      // Past the drop and the gateway's pause before another try.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      assert.equal(upstream.received.length, 1, 'not sent again');
      const account = await stack.settledAccount(caller.accountId);
      assert.deepEqual([account.spent_micros, account.held_micros], [0, 0]);
    } finally {
      await stack.close();
      await upstream.close();
    }
  });
});
