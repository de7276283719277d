import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemResolver, type HostResolver } from '../../core/host-names.ts';
import { bearer } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// A name can lead inside as surely as a literal address: `169.254.169.254.nip.io` resolves to
// cloud metadata from anywhere. The names of chat media URLs (fetched by the upstream), video
// reference media (fetched by the vendor) and callbacks (called by the worker) are resolved
// before anything is held or sent. This machine resolves no public name, so the test's
// resolver answers its own names and hands every other to the system's.

const answers: Record<string, string[] | string> = {
  'metadata.nip.example': ['169.254.169.254'],
  'mixed.example': ['93.184.216.34', '10.0.0.7'],
  'public.example': ['93.184.216.34'],
  'flaky.example': 'EAI_AGAIN',
};

describe('caller URLs whose names resolve inside', () => {
  let stack: SimulatorStack;
  let key: string;
  let accountId: string;
  const asked: string[] = [];
  const resolveHost: HostResolver = async (hostname) => {
    asked.push(hostname);
    const answer = answers[hostname];
    if (answer === undefined) return systemResolver(hostname);
    if (typeof answer === 'string') throw Object.assign(new Error(`getaddrinfo ${answer} ${hostname}`), { code: answer });
    return answer;
  };

  before(async () => {
    stack = await startOpenAiStack('resolved-host-names', { OUTBOUND_ALLOWLIST: 'loopback' }, { resolveHost });
    ({ key, accountId } = await stack.newCaller('names'));
  });
  after(() => stack.close());

  const chatWithImage = (url: string) => ({
    model: 'gpt-4o-mini',
    max_tokens: 5,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'describe it' }, { type: 'image_url', image_url: { url } }, { type: 'image_url', image_url: { url } }] }],
  });
  const post = (url: string, body: object, as = key) => stack.app.inject({ method: 'POST', url, headers: { ...bearer(as), 'content-type': 'application/json' }, payload: JSON.stringify(body) });

  it('chat: a media name resolving to cloud metadata, or to a private address among public ones, is a 400 naming the part; nothing is held or sent', async () => {
    for (const host of ['metadata.nip.example', 'mixed.example']) {
      const before = await stack.simulatorStats();
      asked.length = 0;
      const response = await post('/v1/chat/completions', chatWithImage(`http://${host}/latest/meta-data/`));
      assert.equal(response.statusCode, 400, response.body);
      const { error } = response.json();
      assert.equal(error.param, 'messages.0.content.1.image_url.url');
      assert.match(error.message, /its host resolves to an internal address, which the gateway does not send a model provider to/);
      // The caller learns that it leads inside, not where: the address stays in the log.
      assert.doesNotMatch(error.message, /169\.254|10\.0\.0\.7/);
      // Two parts on one host: one lookup.
      assert.deepEqual(asked, [host]);
      assert.deepEqual(await stack.simulatorStats(), before);
    }
    // Nothing was held or charged.
    assert.deepEqual(await stack.ledgerEntries(accountId), []);
  });

  it('chat: a name that could not be resolved is a 503 to retry; a public one and one that does not exist go to the upstream', async () => {
    const flaky = await post('/v1/chat/completions', chatWithImage('https://flaky.example/cat.png'));
    assert.equal(flaky.statusCode, 503, flaky.body);
    assert.equal(flaky.headers['retry-after'], '1');
    assert.equal(flaky.json().error.param, 'messages.0.content.1.image_url.url');
    for (const url of ['https://public.example/cat.png', 'https://no-such-host.invalid/cat.png']) {
      const before = await stack.simulatorStats();
      const response = await post('/v1/chat/completions', chatWithImage(url));
      assert.equal(response.statusCode, 200, `${url}: ${response.body}`);
      assert.equal((await stack.simulatorStats()).chat_requests, before.chat_requests + 1);
    }
  });

  it('video: a reference image or a callback whose name resolves inside is a 400 naming it; a flaky name a 503', async () => {
    const { key: videoKey, accountId: videoAccount } = await stack.newCaller('video-names');
    const withImage = (url: string) => ({ model: 'seedance-2.0', prompt: 'a cat', metadata: { content: [{ type: 'image_url', image_url: { url }, role: 'reference_image' }] } });
    const image = await post('/v1/video/generations', withImage('https://metadata.nip.example/latest/a.png'), videoKey);
    assert.equal(image.statusCode, 400, image.body);
    assert.equal(image.json().error.param, 'metadata.content.0.image_url.url');
    assert.match(image.json().error.message, /resolves to an internal address, which the gateway does not send a vendor to/);
    const callback = await post('/v1/video/generations', { model: 'seedance-2.0', prompt: 'a cat', metadata: { callback_url: 'https://mixed.example/hook' } }, videoKey);
    assert.equal(callback.statusCode, 400, callback.body);
    assert.equal(callback.json().error.param, 'metadata.callback_url');
    assert.match(callback.json().error.message, /does not send its callbacks to/);
    const flaky = await post('/v1/video/generations', withImage('https://flaky.example/a.png'), videoKey);
    assert.equal(flaky.statusCode, 503, flaky.body);
    assert.equal(flaky.json().error.param, 'metadata.content.0.image_url.url');
    // No task was made and nothing held.
    assert.deepEqual(await stack.ledgerEntries(videoAccount), []);
  });
});
