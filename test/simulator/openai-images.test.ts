import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { crc32, inflateSync } from 'node:zlib';
import { request } from 'undici';
import { pngSignature, startSimulator, type SimulatorHarness } from './simulator-harness.ts';

/** Reads a PNG the way a decoder would: signature, chunk CRCs, IHDR, inflated pixel rows. */
function decodePng(bytes: Buffer) {
  assert.deepEqual(bytes.subarray(0, 8), pngSignature, 'PNG signature');
  const chunks: { type: string; data: Buffer }[] = [];
  for (let offset = 8; offset < bytes.length; ) {
    const length = bytes.readUInt32BE(offset);
    const type = bytes.toString('latin1', offset + 4, offset + 8);
    const data = bytes.subarray(offset + 8, offset + 8 + length);
    assert.equal(bytes.readUInt32BE(offset + 8 + length), crc32(bytes.subarray(offset + 4, offset + 8 + length)), `CRC of ${type}`);
    chunks.push({ type, data });
    offset += 12 + length;
  }
  // A padded image (`[sim:image_kib=N]`) has a private ancillary chunk (lowercase first
  // letter: decoders that do not know it skip it) between the header and the pixels.
  const padding = chunks.filter((chunk) => chunk.type === 'fgPd');
  assert.deepEqual(chunks.filter((chunk) => chunk.type !== 'fgPd').map((chunk) => chunk.type), ['IHDR', 'IDAT', 'IEND']);
  const header = chunks[0]!.data;
  const width = header.readUInt32BE(0);
  const height = header.readUInt32BE(4);
  const pixels = inflateSync(chunks.find((chunk) => chunk.type === 'IDAT')!.data);
  assert.equal(pixels.length, height * (1 + width * 3), 'one filter byte and RGB per pixel on every row');
  return { width, height, firstPixel: [...pixels.subarray(1, 4)], paddingBytes: padding.reduce((sum, chunk) => sum + chunk.data.length, 0) };
}

describe('simulator: OpenAI image generation', () => {
  let simulator: SimulatorHarness;
  before(async () => {
    simulator = await startSimulator();
  });
  after(() => simulator.close());

  const generate = (body: Record<string, unknown>) => simulator.call('POST', '/v1/images/generations', { json: { model: 'gpt-image-1', ...body } });

  it('returns URLs of real PNGs served by the simulator', async () => {
    const response = await generate({ prompt: 'a lighthouse', n: 2, size: '1024x1024', response_format: 'url' });
    assert.equal(response.status, 200);
    assert.equal(typeof response.json.created, 'number');
    assert.equal(response.json.data.length, 2);
    assert.ok(response.json.usage.total_tokens > 0);
    const images = [];
    for (const entry of response.json.data) {
      assert.match(entry.url, new RegExp(`^${simulator.url}/media/img_[0-9a-f]+\\.png$`));
      const download = await request(entry.url);
      assert.equal(download.statusCode, 200);
      assert.equal(download.headers['content-type'], 'image/png');
      images.push(decodePng(Buffer.from(await download.body.arrayBuffer())));
    }
    assert.deepEqual([images[0]!.width, images[0]!.height], [64, 64], 'capped at 64 pixels');
    assert.notDeepEqual(images[0]!.firstPixel, images[1]!.firstPixel, 'each image of a request differs');
  });

  it('returns b64_json that decodes to a PNG, the same for the same prompt, keeping the aspect ratio', async () => {
    const first = await generate({ prompt: 'a red square', response_format: 'b64_json', size: '1792x1024' });
    assert.equal(first.status, 200);
    const [entry] = first.json.data;
    assert.equal(entry.url, undefined);
    const png = decodePng(Buffer.from(entry.b64_json, 'base64'));
    assert.deepEqual([png.width, png.height], [64, 37]);
    const again = await generate({ prompt: 'a red square', response_format: 'b64_json', size: '1792x1024' });
    assert.equal(again.json.data[0].b64_json, entry.b64_json, 'the colours derive from the prompt');
    const other = await generate({ prompt: 'a blue circle', response_format: 'b64_json', size: '256x256' });
    assert.notEqual(other.json.data[0].b64_json, entry.b64_json);
  });

  it('makes each image N KiB larger with [sim:image_kib=N], still a PNG of the size asked for', async () => {
    const padded = await generate({ prompt: 'a red square [sim:image_kib=300]', response_format: 'b64_json', n: 2 });
    assert.equal(padded.status, 200);
    assert.equal(padded.json.data.length, 2);
    for (const entry of padded.json.data) {
      const png = decodePng(Buffer.from(entry.b64_json, 'base64'));
      assert.deepEqual([png.width, png.height, png.paddingBytes], [64, 64, 300 * 1024]);
    }
    const plain = decodePng(Buffer.from((await generate({ prompt: 'a red square', response_format: 'b64_json' })).json.data[0].b64_json, 'base64'));
    assert.equal(plain.paddingBytes, 0);
  });

  it('answers without response_format as OpenAI does: base64 for gpt-image models, which take none there, a link for dall-e ones', async () => {
    for (const model of ['gpt-image-1', 'gpt-image-1-mini']) {
      const [entry] = (await generate({ model, prompt: 'a kite' })).json.data;
      assert.equal(entry.url, undefined, model);
      assert.deepEqual(Buffer.from(entry.b64_json, 'base64').subarray(0, 8), pngSignature, model);
    }
    for (const body of [{ model: 'dall-e-3' }, { model: 'gpt-image-1', response_format: null }]) {
      const [entry] = (await generate({ prompt: 'a kite', ...body })).json.data;
      const expected = body.model === 'dall-e-3' ? 'url' : 'b64_json';
      assert.equal(typeof entry[expected], 'string', JSON.stringify(body));
    }
  });

  it('[sim:error=NNN] answers that status in OpenAI\'s error shape', async () => {
    const limited = await generate({ prompt: 'busy [sim:error=429]' });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '1');
    assert.equal(limited.json.error.code, 'rate_limit_exceeded');
    const unavailable = await generate({ prompt: 'down [sim:error=503]' });
    assert.equal(unavailable.status, 503);
    assert.equal(unavailable.json.error.type, 'server_error');
  });

  it('validates n, size and response_format, and requires a key', async () => {
    assert.equal((await generate({ prompt: 'x', n: 11 })).json.error.param, 'n');
    assert.equal((await generate({ prompt: 'x', size: 'huge' })).json.error.param, 'size');
    assert.equal((await generate({ prompt: 'x', response_format: 'gif' })).json.error.param, 'response_format');
    assert.equal((await generate({})).status, 400);
    const anonymous = await simulator.call('POST', '/v1/images/generations', { anonymous: true, json: { prompt: 'x' } });
    assert.equal(anonymous.status, 401);
    assert.equal((await simulator.call('GET', '/media/img_unknown.png', { anonymous: true })).status, 404);
  });
});
