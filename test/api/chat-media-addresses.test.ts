import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bearer } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';
import { internalMediaAddressIn } from '../../api/services/openai-proxy/message-media-addresses.ts';
import { parseOutboundAllowlist } from '../../core/outbound-guard.ts';

// Media URLs inside chat messages are fetched by the upstream, as a video submission's reference
// media are fetched by its vendor. A self-hosted OpenAI-compatible server (vLLM fetches
// `image_url`, `video_url` and `audio_url` parts itself) sits inside the operator's network, so a
// literal internal address there is refused as it is for video reference media: a 400 naming
// the part, before any money is held or the upstream is asked.

const chatWith = (part: object) => ({
  model: 'gpt-4o-mini',
  max_tokens: 5,
  messages: [{ role: 'user', content: [{ type: 'text', text: 'describe it' }, part] }],
});

describe('chat media URLs on internal addresses', () => {
  let stack: SimulatorStack;
  let key: string;
  before(async () => {
    // npm start's allowlist: loopback only.
    stack = await startOpenAiStack('chat-media-addresses', { OUTBOUND_ALLOWLIST: 'loopback' });
    ({ key } = await stack.newCaller('media'));
  });
  after(() => stack.close());

  const postChat = (body: object) =>
    stack.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(key), 'content-type': 'application/json' }, payload: JSON.stringify(body) });

  const refused: Array<{ name: string; part: object; param: string; says: string }> = [
    { name: 'cloud metadata (link-local)', part: { type: 'image_url', image_url: { url: 'http://169.254.169.254/latest/meta-data/iam/' } }, param: 'messages.0.content.1.image_url.url', says: 'link-local' },
    { name: 'a private address', part: { type: 'image_url', image_url: { url: 'http://10.0.0.5/cat.png', detail: 'low' } }, param: 'messages.0.content.1.image_url.url', says: 'private' },
    { name: 'an image_url given as a bare string', part: { type: 'image_url', image_url: 'http://192.168.1.10/cat.png' }, param: 'messages.0.content.1.image_url', says: 'private' },
    // vLLM reads these keys whatever the part's type: an input_image's string, and any part
    // beside a `uuid` (a decoy under the type's own key does not hide it).
    { name: "vLLM's input_image", part: { type: 'input_image', image_url: 'http://169.254.169.254/latest/meta-data/' }, param: 'messages.0.content.1.image_url', says: 'link-local' },
    { name: 'a media key beside a uuid in a text part', part: { type: 'text', text: 'x', uuid: 'u1', image_url: 'http://169.254.169.254/latest/' }, param: 'messages.0.content.1.image_url', says: 'link-local' },
    { name: 'a media key behind a decoy of the type', part: { type: 'video_url', uuid: 'u1', video_url: { url: 'https://example.com/a.mp4' }, image_url: { url: 'http://10.0.0.5/' } }, param: 'messages.0.content.1.image_url.url', says: 'private' },
    // Node's parser cannot read a zone id, Python's can (and connects): refused, not passed on unchecked.
    { name: 'an IPv6 literal with a zone id', part: { type: 'image_url', image_url: { url: 'http://[::ffff:169.254.169.254%1]/latest/' } }, param: 'messages.0.content.1.image_url.url', says: 'not a URL the gateway can read' },
    { name: 'a scheme split by a tab', part: { type: 'image_url', image_url: { url: 'ht\ttp://10.1.1.1/x.png' } }, param: 'messages.0.content.1.image_url.url', says: 'private' },
    { name: "a file: URL (the server's own files)", part: { type: 'image_url', image_url: { url: 'file:///etc/passwd' } }, param: 'messages.0.content.1.image_url.url', says: 'file: URL' },
    { name: 'an IPv6 unique-local literal', part: { type: 'image_url', image_url: { url: 'http://[fd00::1]/cat.png' } }, param: 'messages.0.content.1.image_url.url', says: 'unique-local' },
    { name: 'metadata behind an IPv4-mapped IPv6 literal', part: { type: 'image_url', image_url: { url: 'http://[::ffff:169.254.169.254]/latest/' } }, param: 'messages.0.content.1.image_url.url', says: 'link-local' },
    { name: "a video part (vLLM's video_url)", part: { type: 'video_url', video_url: { url: 'http://172.16.0.9/clip.mp4' } }, param: 'messages.0.content.1.video_url.url', says: 'private' },
    { name: "an audio part (vLLM's audio_url)", part: { type: 'audio_url', audio_url: { url: 'https://100.64.1.1/a.wav' } }, param: 'messages.0.content.1.audio_url.url', says: 'carrier-grade NAT' },
  ];

  for (const { name, part, param, says } of refused) {
    it(`400 naming ${param}: ${name}`, async () => {
      const before = await stack.simulatorStats();
      const response = await postChat(chatWith(part));
      assert.equal(response.statusCode, 400, response.body);
      const { error } = response.json();
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.param, param);
      assert.ok(error.message.includes(says), error.message);
      // The upstream was never asked.
      assert.deepEqual(await stack.simulatorStats(), before);
    });
  }

  it('an assistant message of an earlier turn is checked too', async () => {
    const response = await postChat({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'image_url', image_url: { url: 'http://10.1.2.3/x.png' } }] },
        { role: 'user', content: 'again' },
      ],
    });
    assert.equal(response.statusCode, 400, response.body);
    assert.equal(response.json().error.param, 'messages.1.content.0.image_url.url');
  });

  it('passes public addresses, names that lead nowhere inside (resolved-host-names.test.ts), data: URLs and allowlisted loopback', async () => {
    for (const url of ['https://example.com/cat.png', 'http://93.184.216.34/cat.png', 'http://images.internal.example/cat.png', 'data:image/png;base64,iVBORw0KGgo=', 'http://127.0.0.1:9/cat.png']) {
      const response = await postChat(chatWith({ type: 'image_url', image_url: { url } }));
      assert.equal(response.statusCode, 200, `${url}: ${response.body}`);
    }
  });

  it('sends the upstream each URL as it was checked: a parser that reads a backslash as part of the authority gets the host the gateway saw', () => {
    // WHATWG reads `evil.example` as the host here, Python's urlsplit 169.254.169.254.
    const messages = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://evil.example\\@169.254.169.254/latest/' } }, { type: 'image_url', image_url: 'HTTP://Images.Example/a b.png' }] }];
    assert.equal(internalMediaAddressIn(messages, parseOutboundAllowlist('')), null);
    assert.deepEqual(messages[0]!.content.map((part) => part.image_url), [{ url: 'http://evil.example/@169.254.169.254/latest/' }, 'http://images.example/a%20b.png']);
    // A localhost name written fully qualified is loopback too (this stack's allowlist admits
    // loopback, an empty one does not).
    const qualified = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://localhost.:8080/' } }] }];
    assert.match(internalMediaAddressIn(qualified, parseOutboundAllowlist(''))?.message ?? '', /loopback/);
    // A data: URL is not parsed (megabytes of base64) and goes as it came.
    const inline = `data:image/png;base64,${'A'.repeat(1_000)}`;
    const withInline = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: inline } }] }];
    assert.equal(internalMediaAddressIn(withInline, parseOutboundAllowlist('')), null);
    assert.equal(withInline[0]!.content[0]!.image_url.url, inline);
  });
});
