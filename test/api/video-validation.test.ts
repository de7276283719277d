import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminHeaders, bearer, createAccount, createKey, startTestApp, type TestApp } from '../helpers/app.ts';

const image = (index: number, role = 'reference_image') => ({ type: 'image_url', image_url: { url: `https://media.example/${index}.png` }, role });
const video = (index: number) => ({ type: 'video_url', video_url: { url: `https://media.example/${index}.mp4` }, role: 'reference_video' });
const audio = (index: number) => ({ type: 'audio_url', audio_url: { url: `https://media.example/${index}.mp3` }, role: 'reference_audio' });

// [label, body, status, param, message pattern]
const refusals: Array<[string, Record<string, unknown>, number, string | undefined, RegExp]> = [
  ['no model', { prompt: 'a cat' }, 400, 'model', /'model'.*required/],
  ['no prompt', { model: 'seedance-2.0' }, 400, 'prompt', /'prompt'.*required/],
  ['an empty prompt', { model: 'seedance-2.0', prompt: '   ' }, 400, 'prompt', /must not be empty/],
  ['a prompt of plane-14 tag characters only', { model: 'seedance-2.0', prompt: '\u{E0001}\u{E0068}\u{E0069} \u{E0100}' }, 400, 'prompt', /must not be empty \(only whitespace, control or invisible characters\)/],
  ['a prompt of control characters only', { model: 'seedance-2.0', prompt: '\u0000\u0001\u007f\u0085 ' }, 400, 'prompt', /must not be empty \(only whitespace, control or invisible characters\)/],
  ['a prompt of zero-width characters only', { model: 'seedance-2.0', prompt: '\u200b\u200d\u2060\u00ad' }, 400, 'prompt', /must not be empty/],
  ['a callback_url on port 00', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://hooks.example:00/x' } }, 400, 'metadata.callback_url', /no port 0/],
  ['a prompt that is a number', { model: 'seedance-2.0', prompt: 5 }, 400, 'prompt', /'prompt': must be a string$/],
  ['a model that is a list', { model: ['seedance-2.0'], prompt: 'x' }, 400, 'model', /'model': must be a video model id from GET \/v1\/models$/],
  ['an unknown model', { model: 'seedance-9', prompt: 'x' }, 404, 'model', /does not exist/],
  ['a chat model', { model: 'gpt-4o-mini', prompt: 'x' }, 400, 'model', /chat model/],
  ['seconds as a number', { model: 'seedance-2.0', prompt: 'x', seconds: 5 }, 400, 'seconds', /string of digits/],
  ['seconds with a unit', { model: 'seedance-2.0', prompt: 'x', seconds: '5s' }, 400, 'seconds', /string of digits/],
  ['seconds out of range', { model: 'seedance-2.0', prompt: 'x', seconds: '16' }, 400, 'seconds', /one of 4, 5, .*15/],
  ['seconds the model does not offer', { model: 'seedance-1.0-pro', prompt: 'x', seconds: '7' }, 400, 'seconds', /one of 5, 10/],
  ['a resolution the model lacks', { model: 'sora-2', prompt: 'x', metadata: { resolution: '1080p' } }, 400, 'metadata.resolution', /one of 720p/],
  ['an unknown resolution', { model: 'seedance-2.0', prompt: 'x', metadata: { resolution: '4k' } }, 400, 'metadata.resolution', /480p, 720p, 1080p/],
  ['a ratio the model lacks', { model: 'sora-2', prompt: 'x', metadata: { ratio: '1:1' } }, 400, 'metadata.ratio', /16:9, 9:16/],
  ['audio on a model without audio', { model: 'seedance-1.0-pro', prompt: 'x', metadata: { generate_audio: true } }, 400, 'metadata.generate_audio', /cannot generate audio/],
  ['callback_url at the top level', { model: 'seedance-2.0', prompt: 'x', callback_url: 'https://hooks.example/x' }, 400, 'callback_url', /belongs inside metadata/],
  ['a relative callback_url', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: '/hook' } }, 400, 'metadata.callback_url', /absolute http\(s\) URL/],
  ['an ftp callback_url', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'ftp://hooks.example/x' } }, 400, 'metadata.callback_url', /absolute http\(s\) URL/],
  ['a callback_url on port 0', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://hooks.example:0/x' } }, 400, 'metadata.callback_url', /no port 0/],
  ['a callback_url with credentials', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'https://user:secret@hooks.example/x' } }, 400, 'metadata.callback_url', /must not contain credentials/],
  ['a callback_url on an IPv6 address', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://[2001:db8::1]/hook' } }, 400, 'metadata.callback_url', /no IPv6/],
  ['a callback_url whose xn-- label is not punycode', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'https://xn--a.example/hook' } }, 400, 'metadata.callback_url', /absolute http\(s\) URL/],
  ['a callback_url label ending in a hyphen', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'https://hooks-.example/hook' } }, 400, 'metadata.callback_url', /DNS name/],
  ['a callback_url longer than the worker calls', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: `https://hooks.example/${'a'.repeat(2100)}` } }, 400, 'metadata.callback_url', /at most 2048 characters/],
  // Each resolver completes a single label with its own search domains: no host to judge.
  ['a callback_url on a single-label name', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://metadata/computeMetadata/v1/' } }, 400, 'metadata.callback_url', /a name of more than one label, or localhost/],
  ['a reference image on a single-label name', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'image_url', image_url: { url: 'http://redis:6379/a.png' }, role: 'reference_image' }] } }, 400, 'metadata.content.0.image_url.url', /a name of more than one label/],
  ['a callback_url on a private address', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://10.0.0.1:8080/hook' } }, 400, 'metadata.callback_url', /10\.0\.0\.1 is a private address, which the gateway does not call/],
  ['a callback_url on the metadata address', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://169.254.169.254/latest' } }, 400, 'metadata.callback_url', /169\.254\.169\.254 is a link-local address/],
  ['a callback_url on 0.0.0.0', { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: 'http://0.0.0.0/hook' } }, 400, 'metadata.callback_url', /0\.0\.0\.0 is an unspecified address/],
  ['a reference image on the metadata address', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'image_url', image_url: { url: 'http://169.254.169.254/latest/meta-data/' }, role: 'reference_image' }] } }, 400, 'metadata.content.0.image_url.url', /169\.254\.169\.254 is a link-local address, which the gateway does not send a vendor to/],
  ['a reference audio on a private address', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [image(1), { type: 'audio_url', audio_url: { url: 'https://192.168.1.5:8443/a.mp3' }, role: 'reference_audio' }] } }, 400, 'metadata.content.1.audio_url.url', /192\.168\.1\.5 is a private address/],
  ['a reference image on an IPv6 loopback literal', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'image_url', image_url: { url: 'http://[::1]:9000/a.png' }, role: 'reference_image' }] } }, 400, 'metadata.content.0.image_url.url', /no IPv6/],
  ['a reference image on localhost. (a trailing dot)', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'image_url', image_url: { url: 'http://localhost./a.png' }, role: 'reference_image' }] } }, 400, 'metadata.content.0.image_url.url', /with a DNS name or IPv4 address/],
  ['content that is not an array', { model: 'seedance-2.0', prompt: 'x', metadata: { content: {} } }, 400, 'metadata.content', /must be an array of reference media entries/],
  ['content that is not an array, for a model without reference media', { model: 'sora-2', prompt: 'x', metadata: { content: {} } }, 400, 'metadata.content', /must be an array; the model 'sora-2' accepts no reference media/],
  ['an unknown content type', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'text_url', role: 'reference_image' }] } }, 400, 'metadata.content.0.type', /image_url, video_url or audio_url/],
  ['an entry without its url object', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'image_url', role: 'reference_image' }] } }, 400, 'metadata.content.0.image_url', /is required/],
  ['an entry whose object lacks url', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'video_url', video_url: {}, role: 'reference_video' }] } }, 400, 'metadata.content.0.video_url.url', /absolute http/],
  ['a role that does not match the type', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [image(1), { ...video(1), role: 'reference_image' }] } }, 400, 'metadata.content.1.role', /reference_video/],
  ['reference images mixed with frames', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [image(1), image(2, 'first_frame')] } }, 400, 'metadata.content', /cannot be mixed/],
  ['ten reference images', { model: 'seedance-2.0', prompt: 'x', metadata: { content: Array.from({ length: 10 }, (_, i) => image(i)) } }, 400, 'metadata.content', /At most 9 reference images/],
  ['four reference videos', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [video(1), video(2), video(3), video(4)] } }, 400, 'metadata.content', /At most 3 reference videos/],
  ['four reference audios', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [audio(1), audio(2), audio(3), audio(4)] } }, 400, 'metadata.content', /At most 3 reference audios/],
  ['more than the model total', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [...Array.from({ length: 9 }, (_, i) => image(i)), video(1), video(2), audio(1), audio(2)] } }, 400, 'metadata.content', /12 reference entries in total/],
  ['reference images on a frames-only model', { model: 'seedance-1.0-pro', prompt: 'x', metadata: { content: [image(1)] } }, 400, 'metadata.content.0.role', /does not accept reference images/],
  ['frames on a model without frame mode', { model: 'sora-2', prompt: 'x', metadata: { content: [image(1, 'first_frame')] } }, 400, 'metadata.content', /first\/last-frame/],
  ['a last frame without a first frame', { model: 'seedance-1.0-pro', prompt: 'x', metadata: { content: [image(1, 'last_frame')] } }, 400, 'metadata.content', /needs a first_frame/],
  ['@image0', { model: 'seedance-2.0', prompt: 'a cat like @image0', metadata: { content: [image(1)] } }, 400, 'prompt', /@image0/],
  ['@image3 with two images', { model: 'seedance-2.0', prompt: '@image1 meets @image3', metadata: { content: [image(1), image(2)] } }, 400, 'prompt', /@image1 to @image2/],
  ['@image1 with no images', { model: 'seedance-2.0', prompt: 'like @image1' }, 400, 'prompt', /no reference images/],
  ['@Image2 (any case) with one image', { model: 'seedance-2.0', prompt: 'like @Image2', metadata: { content: [image(1)] } }, 400, 'prompt', /cites @Image2, but valid citations are @image1 to @image1/],
  ['@image1 in first/last-frame mode', { model: 'seedance-2.0', prompt: 'from @image1', metadata: { content: [image(1, 'first_frame')] } }, 400, 'prompt', /no reference images/],
  ['a Seedance prompt that sets its own length', { model: 'seedance-2.0', prompt: 'a fox at dawn --dur 12 --rs 1080p', seconds: '4', metadata: { resolution: '480p' } }, 400, 'prompt', /holds '--dur', which Seedance reads as a setting of the clip/],
  ['an empty model', { model: '', prompt: 'x' }, 400, 'model', /'model': must be a video model id/],
  ['metadata a string', { model: 'seedance-2.0', prompt: 'x', metadata: '720p' }, 400, 'metadata', /'metadata': must be an object/],
  ['a null prompt', { model: 'seedance-2.0', prompt: null }, 400, 'prompt', /'prompt'/],
  ['metadata an array', { model: 'seedance-2.0', prompt: 'x', metadata: [] }, 400, 'metadata', /'metadata': must be an object/],
  ['seconds with a leading zero', { model: 'seedance-2.0', prompt: 'x', seconds: '05' }, 400, 'seconds', /without leading zeros/],
  ['an unknown top-level field', { model: 'seedance-2.0', prompt: 'x', duration: 5 }, 400, undefined, /duration/],
  ['an unknown field in a content entry', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ ...image(1), weight: 0.5 }] } }, 400, 'metadata.content.0.weight', /Unknown field 'metadata\.content\.0\.weight'/],
  ['a second url object in a content entry', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ ...image(1), video_url: { url: 'https://media.example/a.mp4' } }] } }, 400, 'metadata.content.0.video_url', /Unknown field/],
  ['an unknown field beside url', { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ ...image(1), image_url: { url: 'https://media.example/a.png', detail: 'high' } }] } }, 400, 'metadata.content.0.image_url.detail', /Unknown field/],
];

describe('POST /v1/video/generations refuses bad requests', () => {
  let harness: TestApp;
  let key: string;
  let accountId: string;
  before(async () => {
    harness = await startTestApp('video-validation');
    accountId = (await createAccount(harness.app, { name: 'validation', balance_usd: 100 })).id;
    key = (await createKey(harness.app, accountId)).key;
  });
  after(() => harness.close());

  for (const [label, body, status, param, message] of refusals) {
    it(`${label} → ${status}${param ? ` naming ${param}` : ''}`, async () => {
      const response = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: body });
      assert.equal(response.statusCode, status, response.body);
      const error = response.json().error;
      if (param) assert.equal(error.param, param);
      assert.match(error.message, message);
    });
  }

  it('a model the key may not use → 403 permission_error', async () => {
    const restricted = (await createKey(harness.app, accountId, { name: 'chat only', models: ['gpt-4o-mini'] })).key;
    const response = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(restricted), payload: { model: 'seedance-2.0', prompt: 'x' } });
    assert.equal(response.statusCode, 403);
    assert.equal(response.json().error.type, 'permission_error');
  });

  it('an unaffordable task → 403 with the price and nothing held', async () => {
    const poor = await createAccount(harness.app, { name: 'poor', balance_usd: 0.1 });
    const poorKey = (await createKey(harness.app, poor.id)).key;
    const response = await harness.app.inject({
      method: 'POST',
      url: '/v1/video/generations',
      headers: bearer(poorKey),
      payload: { model: 'seedance-2.0', prompt: 'x', seconds: '10', metadata: { resolution: '1080p' } },
    });
    assert.equal(response.statusCode, 403);
    assert.equal(response.json().error.type, 'insufficient_quota');
    assert.match(response.json().error.message, /costs \$1\.600000 .* \$0\.100000 available/);
    const account = (await harness.app.inject({ method: 'GET', url: `/admin/accounts/${poor.id}`, headers: adminHeaders })).json();
    assert.equal(account.balance_usd, 0.1);
    assert.equal(account.held_usd, 0);
    assert.equal(await harness.database.db.collection('tasks').countDocuments({ account_id: poor.id }), 0);
  });

  it('reads a field sent as null as left out: the defaults apply and no null is stored or echoed', async () => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/v1/video/generations',
      headers: bearer(key),
      payload: { model: 'seedance-2.0', prompt: 'x', seconds: null, metadata: { ratio: null, resolution: '480p', generate_audio: null, callback_url: null, content: null } },
    });
    assert.equal(response.statusCode, 200, response.body);
    const taskId = response.json().task_id;
    const stored = await harness.database.db.collection('tasks').findOne({ _id: taskId as never });
    assert.equal(stored?.seconds, 5);
    assert.equal(stored?.ratio, '16:9');
    assert.deepEqual(stored?.metadata, { resolution: '480p' });
    assert.equal(stored?.webhook, undefined);
    const task = (await harness.app.inject({ method: 'GET', url: `/v1/video/generations/${taskId}`, headers: bearer(key) })).json();
    assert.equal(Object.values(task.metadata).includes(null), false, JSON.stringify(task.metadata));
    const noMetadata = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'sora-2', prompt: 'x', metadata: null } });
    assert.equal(noMetadata.statusCode, 200, noMetadata.body);
    for (const id of [taskId, noMetadata.json().task_id]) await harness.temporal.client.workflow.getHandle(id).terminate('test cleanup');
  });

  it('takes a prompt whose only visible characters are above U+FFFF (an emoji, a tagged flag)', async () => {
    const taskIds: string[] = [];
    for (const prompt of ['🦊', '\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}', '𝒻𝑜𝓍']) {
      const response = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'seedance-2.0', prompt } });
      assert.equal(response.statusCode, 200, `${prompt}: ${response.body}`);
      taskIds.push(response.json().task_id);
    }
    for (const id of taskIds) await harness.temporal.client.workflow.getHandle(id).terminate('test cleanup');
  });

  it('takes host names with hyphen runs and punycode names, for callbacks and reference media', async () => {
    const hosts = ['deploy-preview-42--mysite.netlify.app', 'green---myservice-abc123-uc.a.run.app', 'xn--80ak6aa92e.com', 'hooks.xn--p1ai', 'hooks.example:08443'];
    const taskIds: string[] = [];
    for (const host of hosts) {
      const response = await harness.app.inject({
        method: 'POST',
        url: '/v1/video/generations',
        headers: bearer(key),
        payload: { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: `https://${host}/hook`, content: [{ type: 'image_url', image_url: { url: `https://${host}/a.png` }, role: 'reference_image' }] } },
      });
      assert.equal(response.statusCode, 200, `${host}: ${response.body}`);
      taskIds.push(response.json().task_id);
    }
    // No worker runs on this queue: stop the workflows to keep the server tidy.
    for (const id of taskIds) await harness.temporal.client.workflow.getHandle(id).terminate('test cleanup');
  });

  it('refuses a callback or reference media URL the worker would refuse on sight, as OUTBOUND_ALLOWLIST says; names go through', async () => {
    const submit = (app: TestApp['app'], callbackUrl: string) =>
      app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'seedance-2.0', prompt: 'x', metadata: { callback_url: callbackUrl } } });
    const strict = await startTestApp('video-validation-strict', { OUTBOUND_ALLOWLIST: '' }, { database: harness.database });
    const lenient = await startTestApp('video-validation-lenient', { OUTBOUND_ALLOWLIST: '10.0.0.0/8' }, { database: harness.database });
    const taskIds: string[] = [];
    try {
      for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost:8080/hook', 'http://hooks.LOCALHOST/hook']) {
        const refused = await submit(strict.app, url);
        assert.equal(refused.statusCode, 400, `${url}: ${refused.body}`);
        assert.equal(refused.json().error.param, 'metadata.callback_url');
        assert.match(refused.json().error.message, /is a loopback address, which the gateway does not call/);
      }
      // The allowlist admits what it names, and a DNS name is left to the connection's check.
      for (const [app, url] of [[lenient.app, 'http://10.1.2.3/hook'], [strict.app, 'https://8.8.8.8/hook'], [strict.app, 'https://hooks.internal.example/hook']] as const) {
        const accepted = await submit(app, url);
        assert.equal(accepted.statusCode, 200, `${url}: ${accepted.body}`);
        taskIds.push(accepted.json().task_id);
      }
      assert.equal((await submit(lenient.app, 'http://127.0.0.1/hook')).statusCode, 400);
      // Reference media follow the same rule: the vendor fetches them.
      const reference = (app: TestApp['app'], url: string) =>
        app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'seedance-2.0', prompt: 'x', metadata: { content: [{ type: 'video_url', video_url: { url }, role: 'reference_video' }] } } });
      const loopbackVideo = await reference(strict.app, 'http://localhost:9000/clip.mp4');
      assert.equal(loopbackVideo.statusCode, 400, loopbackVideo.body);
      assert.equal(loopbackVideo.json().error.param, 'metadata.content.0.video_url.url');
      assert.match(loopbackVideo.json().error.message, /localhost is a loopback address, which the gateway does not send a vendor to/);
      const allowedVideo = await reference(lenient.app, 'http://10.1.2.3/clip.mp4');
      assert.equal(allowedVideo.statusCode, 200, allowedVideo.body);
      taskIds.push(allowedVideo.json().task_id);
      // Allowed as IPv4 only, localhost is still refused: it resolves to ::1 too, which the
      // worker would refuse.
      const ipv4Loopback = await startTestApp('video-validation-ipv4-loopback', { OUTBOUND_ALLOWLIST: '127.0.0.0/8' }, { database: harness.database });
      try {
        assert.equal((await submit(ipv4Loopback.app, 'http://localhost:8080/hook')).statusCode, 400);
      } finally {
        await ipv4Loopback.close();
      }
    } finally {
      for (const id of taskIds) await harness.temporal.client.workflow.getHandle(id).terminate('test cleanup');
      await strict.close();
      await lenient.close();
    }
  });

  it('an unknown task → 404; another account\'s task → 404 too', async () => {
    const unknown = await harness.app.inject({ method: 'GET', url: '/v1/video/generations/task_nope', headers: bearer(key) });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error.code, 'task_not_found');
    const accepted = await harness.app.inject({ method: 'POST', url: '/v1/video/generations', headers: bearer(key), payload: { model: 'seedance-2.0', prompt: 'x' } });
    assert.equal(accepted.statusCode, 200, accepted.body);
    const other = await createAccount(harness.app, { name: 'other' });
    const otherKey = (await createKey(harness.app, other.id)).key;
    const foreign = await harness.app.inject({ method: 'GET', url: `/v1/video/generations/${accepted.json().task_id}`, headers: bearer(otherKey) });
    assert.equal(foreign.statusCode, 404);
    const own = await harness.app.inject({ method: 'GET', url: `/v1/video/generations/${accepted.json().task_id}`, headers: bearer(key) });
    assert.equal(own.statusCode, 200);
    // The task never runs here (no worker on this queue); stop its workflow to keep the server tidy.
    await harness.temporal.client.workflow.getHandle(accepted.json().task_id).terminate('test cleanup');
  });
});
