import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { looksLikeMp4, startSimulator, type SimulatorHarness } from './simulator-harness.ts';

describe('simulator: OpenAI videos (Sora) wire format', () => {
  let simulator: SimulatorHarness;
  before(async () => {
    simulator = await startSimulator();
  });
  after(() => simulator.close());

  const createJson = (body: Record<string, unknown>) => simulator.call('POST', '/v1/videos', { json: { model: 'sora-2', ...body } });
  const read = (id: string) => simulator.call('GET', `/v1/videos/${id}`);

  it('takes multipart/form-data and moves queued → in_progress → completed, then serves the MP4', async () => {
    const form = new FormData();
    form.set('model', 'sora-2');
    form.set('prompt', 'a paper boat [sim:delay=4]');
    form.set('seconds', '8');
    form.set('size', '1280x720');
    const created = await simulator.call('POST', '/v1/videos', { body: form });
    assert.equal(created.status, 200, created.text);
    const video = created.json;
    assert.match(video.id, /^video_[0-9a-f]+$/);
    assert.deepEqual(
      [video.object, video.model, video.status, video.progress, video.completed_at, video.expires_at, video.seconds, video.size, video.error],
      ['video', 'sora-2', 'queued', 0, null, null, '8', '1280x720', null],
    );
    assert.equal(typeof video.created_at, 'number');

    const notYet = await simulator.call('GET', `/v1/videos/${video.id}/content`);
    assert.equal(notYet.status, 404);
    assert.equal(notYet.json.error.type, 'invalid_request_error');

    simulator.advance(2_000);
    const halfway = await read(video.id);
    assert.equal(halfway.json.status, 'in_progress');
    assert.equal(halfway.json.progress, 50);
    simulator.advance(1_000);
    assert.equal((await read(video.id)).json.progress, 75, 'progress rises with time');

    simulator.advance(1_000);
    const completed = await read(video.id);
    assert.equal(completed.json.status, 'completed');
    assert.equal(completed.json.progress, 100);
    assert.equal(completed.json.completed_at, video.created_at + 4);
    assert.ok(completed.json.expires_at > completed.json.completed_at);

    const content = await simulator.call('GET', `/v1/videos/${video.id}/content`);
    assert.equal(content.status, 200);
    assert.equal(content.headers['content-type'], 'video/mp4');
    assert.ok(looksLikeMp4(content.bytes));
    const anonymous = await simulator.call('GET', `/v1/videos/${video.id}/content`, { anonymous: true });
    assert.equal(anonymous.status, 401, 'content needs the key, like the real endpoint');
  });

  it('takes JSON too, with defaults for seconds and size', async () => {
    const created = await createJson({ prompt: 'defaults [sim:delay=0]' });
    assert.equal(created.status, 200);
    assert.equal(created.json.status, 'queued', 'the creation answer is always the queued snapshot');
    assert.deepEqual([created.json.seconds, created.json.size], ['4', '720x1280']);
    assert.equal((await read(created.json.id)).json.status, 'completed');
  });

  it('[sim:fail] ends failed with an error object and no content', async () => {
    const created = await createJson({ prompt: 'doomed [sim:fail] [sim:delay=1]' });
    simulator.advance(1_000);
    const failed = await read(created.json.id);
    assert.equal(failed.json.status, 'failed');
    assert.ok(failed.json.error.code);
    assert.ok(failed.json.error.message);
    assert.equal((await simulator.call('GET', `/v1/videos/${created.json.id}/content`)).status, 404);
  });

  it('[sim:reject] answers 400 and [sim:flaky] answers 503 twice before accepting', async () => {
    const rejected = await createJson({ prompt: 'refused [sim:reject]' });
    assert.equal(rejected.status, 400);
    assert.equal(rejected.json.error.type, 'invalid_request_error');

    const prompt = `flaky sora ${Math.random()} [sim:flaky]`;
    const answers = [];
    for (let attempt = 0; attempt < 3; attempt++) answers.push(await createJson({ prompt }));
    assert.deepEqual(answers.map((answer) => answer.status), [503, 503, 200]);
    assert.equal(answers[0]!.headers['retry-after'], '1');
    assert.equal(answers[0]!.json.error.type, 'server_error');
  });

  it('refuses wrong parameters in OpenAI\'s error shape, naming the parameter', async () => {
    const numeric = await createJson({ prompt: 'x', seconds: 4 });
    assert.equal(numeric.status, 400);
    assert.equal(numeric.json.error.param, 'seconds');
    const badSize = await createJson({ prompt: 'x', size: '640x480' });
    assert.equal(badSize.json.error.param, 'size');
    const unknown = await createJson({ prompt: 'x', duration: '4' });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.error.param, 'duration');
    const noPrompt = await createJson({});
    assert.equal(noPrompt.json.error.param, 'prompt');
  });

  it('DELETE removes the video and answers a deleted object', async () => {
    const created = await createJson({ prompt: 'short-lived [sim:delay=3]' });
    const deleted = await simulator.call('DELETE', `/v1/videos/${created.json.id}`);
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.json, { id: created.json.id, object: 'video.deleted', deleted: true });
    assert.equal((await read(created.json.id)).status, 404);
    assert.equal((await simulator.call('DELETE', `/v1/videos/${created.json.id}`)).status, 404);
  });

  it('answers 401 without a key and 404 for unknown ids and paths, in OpenAI\'s error shape', async () => {
    const anonymous = await simulator.call('POST', '/v1/videos', { anonymous: true, json: { prompt: 'x' } });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json.error.code, 'invalid_api_key');
    const unknown = await read('video_missing');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.type, 'invalid_request_error');
    const nowhere = await simulator.call('GET', '/v1/no-such-thing');
    assert.equal(nowhere.status, 404);
    assert.ok(nowhere.json.error.message);
  });
});
