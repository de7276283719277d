import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer, createKey } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { startTestDnsServer } from '../../scripts/lib/test-dns-server.ts';

// A name can lead inside as surely as a literal address: `169.254.169.254.nip.io` resolves to
// cloud metadata from anywhere. The names of chat media URLs (fetched by the upstream), video
// reference media (fetched by the vendor) and callbacks (called by the worker) are resolved
// before anything is held or sent, here against a DNS server on loopback whose answers are
// written in the names (`169-254-169-254.nip.test`, scripts/lib/test-dns-server.ts).

describe('caller URLs whose names resolve inside', () => {
  let dns: Awaited<ReturnType<typeof startTestDnsServer>>;
  let stack: SimulatorStack;
  let key: string;
  let accountId: string;

  before(async () => {
    dns = await startTestDnsServer();
    stack = await startOpenAiStack('resolved-host-names', { OUTBOUND_ALLOWLIST: 'loopback', DNS_SERVERS: dns.address });
    ({ key, accountId } = await stack.newCaller('names'));
  });
  after(async () => {
    await stack.close();
    await dns.stop();
  });

  const chatWithImage = (url: string) => ({
    model: 'gpt-4o-mini',
    max_tokens: 5,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'describe it' }, { type: 'image_url', image_url: { url } }, { type: 'image_url', image_url: { url } }] }],
  });
  const post = (url: string, body: object, as = key) => stack.app.inject({ method: 'POST', url, headers: { ...bearer(as), 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  const withImage = (url: string) => ({ model: 'seedance-2.0', prompt: 'a cat', metadata: { content: [{ type: 'image_url', image_url: { url }, role: 'reference_image' }] } });

  it('chat: a media name resolving to cloud metadata, or to a private address among public ones, is a 400 naming the part; nothing is held or sent', async () => {
    for (const host of ['169-254-169-254.nip.test', '93-184-216-34.10-0-0-7.nip.test']) {
      const before = await stack.simulatorStats();
      dns.asked.length = 0;
      const response = await post('/v1/chat/completions', chatWithImage(`http://${host}/latest/meta-data/`));
      assert.equal(response.statusCode, 400, response.body);
      const { error } = response.json();
      assert.equal(error.param, 'messages.0.content.1.image_url.url');
      assert.match(error.message, /its host resolves to an internal address, which the gateway does not send a model provider to/);
      // The caller learns that it leads inside, not where: the address stays in the log.
      assert.doesNotMatch(error.message, /169\.254|10\.0\.0\.7/);
      // Two parts on one host: one name asked (for both families; and with each of the
      // machine's search domains, if it has any).
      assert.deepEqual(dns.asked.filter((query) => query.endsWith(` ${host}`)).sort(), [`A ${host}`, `AAAA ${host}`]);
      assert.deepEqual(await stack.simulatorStats(), before);
    }
    // Nothing was held or charged.
    assert.deepEqual(await stack.ledgerEntries(accountId), []);
  });

  it('chat and video: a name whose DNS server never answers is a 503 to retry, after the 3 s deadline; nothing is held or sent', async () => {
    const { key: otherKey, accountId: otherAccount } = await stack.newCaller('silent-names');
    const before = await stack.simulatorStats();
    const [chat, video] = await Promise.all([
      post('/v1/chat/completions', chatWithImage('https://silent.nip.test/cat.png'), otherKey),
      post('/v1/video/generations', withImage('https://silent.nip.test/a.png'), otherKey),
    ]);
    for (const [response, param] of [[chat, 'messages.0.content.1.image_url.url'], [video, 'metadata.content.0.image_url.url']] as const) {
      assert.equal(response.statusCode, 503, response.body);
      assert.equal(response.headers['retry-after'], '1');
      assert.equal(response.json().error.param, param);
      assert.match(response.json().error.message, /could not be resolved just now/);
    }
    assert.deepEqual(await stack.simulatorStats(), before);
    assert.deepEqual(await stack.ledgerEntries(otherAccount), []);
  });

  it('chat: a call its key or body already refuses is refused at once, before its media names are asked', async () => {
    const { key: otherKey, accountId: otherAccount } = await stack.newCaller('refused-first');
    const imageOnly = (await createKey(stack.app, otherAccount, { name: 'image-only', models: ['gpt-image-1'] })).key;
    const silentImage = chatWithImage('https://silent.nip.test/cat.png');
    const withAudio = { ...silentImage, messages: [{ role: 'user', content: [...silentImage.messages[0]!.content, { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }] };
    const cases = [
      { as: otherKey, body: withAudio, status: 400, param: 'messages.0.content.3.type' },
      { as: otherKey, body: { ...silentImage, max_tokens: 100_000 }, status: 400, param: 'max_tokens' },
      { as: imageOnly, body: silentImage, status: 403, param: 'model' },
    ];
    dns.asked.length = 0;
    for (const { as, body, status, param } of cases) {
      const started = performance.now();
      const response = await post('/v1/chat/completions', body, as);
      assert.equal(response.statusCode, status, response.body);
      assert.equal(response.json().error.param, param);
      // The silent zone would have held each for the 3 s deadline, and then been a 503.
      assert.ok(performance.now() - started < 1500, `answered after ${Math.round(performance.now() - started)} ms`);
    }
    assert.deepEqual(dns.asked.filter((query) => query.includes('silent.nip.test')), []);
    assert.deepEqual(await stack.ledgerEntries(otherAccount), []);
  });

  it('chat: a public name, one that does not exist and one whose zone fails go to the upstream', async () => {
    for (const url of ['https://93-184-216-34.nip.test/cat.png', 'https://no-such-host.invalid/cat.png', 'https://servfail.nip.test/cat.png']) {
      const before = await stack.simulatorStats();
      const response = await post('/v1/chat/completions', chatWithImage(url));
      assert.equal(response.statusCode, 200, `${url}: ${response.body}`);
      assert.equal((await stack.simulatorStats()).chat_requests, before.chat_requests + 1);
    }
  });

  it('video: a reference image or a callback whose name resolves inside is a 400 naming it; nothing is held', async () => {
    const { key: videoKey, accountId: videoAccount } = await stack.newCaller('video-names');
    const image = await post('/v1/video/generations', withImage('https://169-254-169-254.nip.test/latest/a.png'), videoKey);
    assert.equal(image.statusCode, 400, image.body);
    assert.equal(image.json().error.param, 'metadata.content.0.image_url.url');
    assert.match(image.json().error.message, /resolves to an internal address, which the gateway does not send a vendor to/);
    const callback = await post('/v1/video/generations', { model: 'seedance-2.0', prompt: 'a cat', metadata: { callback_url: 'https://v6-fd00--1.nip.test/hook' } }, videoKey);
    assert.equal(callback.statusCode, 400, callback.body);
    assert.equal(callback.json().error.param, 'metadata.callback_url');
    assert.match(callback.json().error.message, /does not send its callbacks to/);
    assert.deepEqual(await stack.ledgerEntries(videoAccount), []);
  });
});
