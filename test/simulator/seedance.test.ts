import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { looksLikeMp4, startSimulator, type SimulatorHarness } from './simulator-harness.ts';

const tasksPath = '/api/v3/contents/generations/tasks';

describe('simulator: Seedance (ModelArk) video tasks', () => {
  let simulator: SimulatorHarness;
  before(async () => {
    simulator = await startSimulator();
  });
  after(() => simulator.close());

  const create = (prompt: string, extra: Record<string, unknown> = {}) =>
    simulator.call('POST', tasksPath, { json: { model: 'dreamina-seedance-2-0-260128', content: [{ type: 'text', text: prompt }], ...extra } });
  const read = (id: string) => simulator.call('GET', `${tasksPath}/${id}`);

  it('goes queued → running → succeeded and serves a real MP4 at content.video_url', async () => {
    const created = await create('a red fox at dawn [sim:delay=10]', { ratio: '9:16', resolution: '480p', duration: 5, generate_audio: true });
    assert.equal(created.status, 200);
    assert.deepEqual(Object.keys(created.json), ['id']);
    assert.match(created.json.id, /^cgt-\d{14}-[a-z0-9]{5}$/);
    const id = created.json.id;

    const queued = await read(id);
    assert.equal(queued.json.status, 'queued');
    assert.equal(queued.json.content, undefined);
    assert.equal(queued.json.error, null);

    simulator.advance(5_000);
    const running = await read(id);
    assert.equal(running.json.status, 'running');
    assert.equal(running.json.updated_at, queued.json.created_at + 1, 'running since 10 % of the 10 s run');

    simulator.advance(5_000);
    const done = await read(id);
    assert.equal(done.status, 200);
    assert.equal(done.json.status, 'succeeded');
    assert.equal(done.json.updated_at, done.json.created_at + 10);
    assert.deepEqual(
      [done.json.model, done.json.ratio, done.json.resolution, done.json.duration, done.json.framespersecond, done.json.generate_audio],
      ['dreamina-seedance-2-0-260128', '9:16', '480p', 5, 24, true],
    );
    assert.equal(typeof done.json.seed, 'number');
    // 480p at 9:16 is 480 × 853 pixels: 480 × 853 × 24 fps × 5 s / 1024 tokens.
    assert.deepEqual(done.json.usage, { completion_tokens: 47981, total_tokens: 47981 });
    assert.equal(done.json.content.video_url, `${simulator.url}/media/${id}.mp4`);

    const clip = await request(done.json.content.video_url);
    assert.equal(clip.statusCode, 200);
    assert.equal(clip.headers['content-type'], 'video/mp4');
    const bytes = Buffer.from(await clip.body.arrayBuffer());
    assert.ok(looksLikeMp4(bytes), 'starts with an ftyp box');
    assert.ok(bytes.length > 1_000 && bytes.length < 50_000, `size ${bytes.length}`);
  });

  it('answers Range requests on the clip with 206 and the asked bytes', async () => {
    const { json } = await create('ranged [sim:delay=0]');
    const url = `${simulator.url}/media/${json.id}.mp4`;
    const whole = Buffer.from(await (await request(url)).body.arrayBuffer());
    const part = await request(url, { headers: { range: 'bytes=4-11' } });
    assert.equal(part.statusCode, 206);
    assert.equal(part.headers['content-range'], `bytes 4-11/${whole.length}`);
    const partBytes = Buffer.from(await part.body.arrayBuffer());
    assert.equal(partBytes.toString('latin1', 0, 4), 'ftyp');
    assert.deepEqual(partBytes, whole.subarray(4, 12));
    const beyond = await request(url, { headers: { range: `bytes=${whole.length}-` } });
    assert.equal(beyond.statusCode, 416);
    await beyond.body.dump();
    // If-Range: the part only when it names these bytes, else the whole clip.
    const etag = String(part.headers.etag);
    assert.match(etag, /^"[\w-]{27}"$/);
    const resumed = await request(url, { headers: { range: 'bytes=4-11', 'if-range': etag } });
    assert.equal(resumed.statusCode, 206);
    await resumed.body.dump();
    for (const stale of ['"other bytes"', 'Wed, 21 Oct 2026 07:28:00 GMT']) {
      const restarted = await request(url, { headers: { range: 'bytes=4-11', 'if-range': stale } });
      assert.equal(restarted.statusCode, 200, stale);
      assert.deepEqual(Buffer.from(await restarted.body.arrayBuffer()), whole);
    }
  });

  it('does not serve the clip of a task that has not finished', async () => {
    const { json } = await create('still going [sim:delay=5]');
    const early = await simulator.call('GET', `/media/${json.id}.mp4`, { anonymous: true });
    assert.equal(early.status, 404);
  });

  it('[sim:delay=N] sets the run time, fractions included; [sim:delay=0] is instant; default is 1 s', async () => {
    const short = (await create('quick [sim:delay=0.2]')).json.id;
    const instant = (await create('now [sim:delay=0]')).json.id;
    const plain = (await create('no marker')).json.id;
    assert.equal((await read(instant)).json.status, 'succeeded');
    simulator.advance(100);
    assert.equal((await read(short)).json.status, 'running');
    simulator.advance(100);
    assert.equal((await read(short)).json.status, 'succeeded');
    assert.equal((await read(plain)).json.status, 'running');
    simulator.advance(800);
    assert.equal((await read(plain)).json.status, 'succeeded');
  });

  it('[sim:fail] runs, then fails with a vendor error code and no video', async () => {
    const { json } = await create('doomed [sim:fail] [sim:delay=1]');
    simulator.advance(500);
    assert.equal((await read(json.id)).json.status, 'running');
    simulator.advance(500);
    const failed = await read(json.id);
    assert.equal(failed.json.status, 'failed');
    assert.equal(failed.json.error.code, 'OutputVideoSensitiveContentDetected');
    assert.ok(failed.json.error.message);
    assert.equal(failed.json.content, undefined);
    assert.equal(failed.json.usage, undefined);
  });

  it('[sim:reject] answers 400 InvalidParameter at submission', async () => {
    const rejected = await create('refused [sim:reject]');
    assert.equal(rejected.status, 400);
    assert.equal(rejected.json.error.code, 'InvalidParameter');
    assert.equal(rejected.json.error.type, 'BadRequest');
  });

  it('[sim:flaky] answers 503 with Retry-After to the first two attempts of a prompt, then accepts', async () => {
    const prompt = `flaky seedance ${Math.random()} [sim:flaky]`;
    for (let attempt = 1; attempt <= 2; attempt++) {
      const refused = await create(prompt);
      assert.equal(refused.status, 503, `attempt ${attempt}`);
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(refused.json.error.type, 'ServiceUnavailable');
    }
    const accepted = await create(prompt);
    assert.equal(accepted.status, 200);
    assert.match(accepted.json.id, /^cgt-/);
    assert.equal((await create(`another ${prompt}`)).status, 503, 'the counter is per prompt');
  });

  it('DELETE cancels a running task; a cancelled task stays cancelled', async () => {
    const { json } = await create('to cancel [sim:delay=2]');
    simulator.advance(1_000);
    const cancelled = await simulator.call('DELETE', `${tasksPath}/${json.id}`);
    assert.equal(cancelled.status, 200);
    assert.deepEqual(cancelled.json, {});
    simulator.advance(5_000);
    const after = await read(json.id);
    assert.equal(after.json.status, 'cancelled');
    assert.equal(after.json.content, undefined);
  });

  it('DELETE of a finished task deletes its record, as Ark does; unknown ids are 404', async () => {
    const { json } = await create('finished [sim:delay=0]');
    assert.equal((await read(json.id)).json.status, 'succeeded');
    assert.equal((await simulator.call('DELETE', `${tasksPath}/${json.id}`)).status, 200);
    assert.equal((await read(json.id)).status, 404);
    const unknown = await simulator.call('DELETE', `${tasksPath}/${json.id}`);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, 'ResourceNotFound');
  });

  it('refuses invalid bodies with 400 naming the parameter', async () => {
    const badDuration = await create('x', { duration: 5.5 });
    assert.equal(badDuration.status, 400);
    assert.equal(badDuration.json.error.code, 'InvalidParameter');
    assert.equal(badDuration.json.error.param, 'duration');
    const badRole = await simulator.call('POST', tasksPath, {
      json: { model: 'm', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' }, role: 'poster' }] },
    });
    assert.equal(badRole.status, 400);
    assert.equal(badRole.json.error.param, 'content.1.role');
    const tooManyVideos = await simulator.call('POST', tasksPath, {
      json: { model: 'm', content: [{ type: 'text', text: 'x' }, ...Array.from({ length: 4 }, () => ({ type: 'video_url', video_url: { url: 'https://example.com/v.mp4' }, role: 'reference_video' }))] },
    });
    assert.equal(tooManyVideos.status, 400);
    assert.match(tooManyVideos.json.error.message, /reference_video/);
    const mixed = await simulator.call('POST', tasksPath, {
      json: {
        model: 'm',
        content: [
          { type: 'text', text: 'x' },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png' }, role: 'first_frame' },
          { type: 'image_url', image_url: { url: 'https://example.com/b.png' }, role: 'reference_image' },
        ],
      },
    });
    assert.equal(mixed.status, 400);
    const notJson = await simulator.call('POST', tasksPath, { body: '{oops', headers: { 'content-type': 'application/json' } });
    assert.equal(notJson.status, 400);
    assert.equal(notJson.json.error.code, 'InvalidParameter');
  });

  it('accepts reference media with their roles', async () => {
    const accepted = await simulator.call('POST', tasksPath, {
      json: {
        model: 'm',
        content: [
          { type: 'text', text: '@image1 walks [sim:delay=0]' },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png' }, role: 'reference_image' },
          { type: 'video_url', video_url: { url: 'https://example.com/v.mp4' }, role: 'reference_video' },
          { type: 'audio_url', audio_url: { url: 'https://example.com/a.mp3' }, role: 'reference_audio' },
        ],
      },
    });
    assert.equal(accepted.status, 200);
    assert.equal((await read(accepted.json.id)).json.status, 'succeeded');
  });

  it('answers 401 without a bearer key and 404 for an unknown task, in Ark\'s error shape', async () => {
    const anonymous = await simulator.call('POST', tasksPath, { anonymous: true, json: { model: 'm', content: [{ type: 'text', text: 'x' }] } });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json.error.code, 'AuthenticationError');
    const emptyKey = await simulator.call('GET', `${tasksPath}/cgt-1`, { anonymous: true, headers: { authorization: 'Bearer ' } });
    assert.equal(emptyKey.status, 401);
    const unknown = await read('cgt-20250101000000-nope0');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, 'ResourceNotFound');
  });

  it('counts accepted tasks and refused submissions in /_sim/stats', async () => {
    const before = await simulator.stats();
    await create('counted [sim:delay=0]');
    await create('refused [sim:reject]');
    const after = await simulator.stats();
    assert.equal(after.video_tasks, before.video_tasks! + 1);
    assert.equal(after.video_submissions_rejected, before.video_submissions_rejected! + 1);
  });
});
