import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import { createOpenAiVideosVendor } from '../../vendors/openai-videos/openai-videos-vendor.ts';
import { VendorRejectedError, VendorTransientError, type VendorTaskStatus, type VideoGenerationRequest, type VideoVendor } from '../../vendors/types.ts';
import { fixture, refusedBaseUrl, startRecordingServer, type RecordingServer } from './recording-server.ts';

const VIDEOS = '/v1/videos';
const VIDEO_ID = 'video_68d7512d07848190b3e45da0ecbebcde004da08e1e0678d5';

describe('OpenAI videos adapter', () => {
  let server: RecordingServer;
  let vendor: VideoVendor;

  before(async () => {
    server = await startRecordingServer();
    vendor = createOpenAiVideosVendor({ baseUrl: server.baseUrl, apiKey: 'sk-test' });
  });
  beforeEach(() => {
    server.requests.length = 0;
    server.answer('POST', VIDEOS, { status: 200, body: fixture('openai-videos', 'video-queued') });
  });
  after(async () => {
    await server.close();
  });

  const base: VideoGenerationRequest = { upstreamModel: 'sora-2', prompt: 'A calico cat playing a piano on stage', content: [] };
  const sentBody = () => JSON.parse(server.requests.at(-1)!.body) as Record<string, unknown>;

  describe('start', () => {
    it('posts model, prompt, seconds as a string and the mapped size as JSON', async () => {
      const started = await vendor.start({ ...base, seconds: 8, ratio: '16:9', resolution: '720p', generateAudio: false });
      assert.deepEqual(started, { vendorTaskId: VIDEO_ID });
      const sent = server.requests[0]!;
      assert.equal(sent.method, 'POST');
      assert.equal(sent.path, VIDEOS);
      assert.equal(sent.headers.authorization, 'Bearer sk-test');
      assert.equal(sent.headers['content-type'], 'application/json');
      // generateAudio has no OpenAI counterpart, so nothing about it is sent.
      assert.deepEqual(sentBody(), { model: 'sora-2', prompt: 'A calico cat playing a piano on stage', seconds: '8', size: '1280x720' });
      assert.doesNotMatch(sent.body, /callback/);
    });

    it('maps ratio and resolution onto the documented sizes', async () => {
      const table: Array<[string, string, string]> = [
        ['16:9', '720p', '1280x720'],
        ['9:16', '720p', '720x1280'],
        ['16:9', '1080p', '1792x1024'],
        ['9:16', '1080p', '1024x1792'],
      ];
      for (const [ratio, resolution, size] of table) {
        await vendor.start({ ...base, seconds: 4, ratio, resolution });
        assert.equal(sentBody().size, size, `${ratio} ${resolution}`);
        assert.equal(sentBody().seconds, '4');
      }
    });

    it('leaves size and seconds to the vendor when none are given', async () => {
      await vendor.start(base);
      assert.deepEqual(sentBody(), { model: 'sora-2', prompt: 'A calico cat playing a piano on stage' });
    });

    it('sends one reference image as input_reference.image_url', async () => {
      await vendor.start({ ...base, ratio: '9:16', resolution: '720p', content: [{ type: 'image_url', url: 'https://media.example.com/cat.png', role: 'first_frame' }] });
      assert.deepEqual(sentBody().input_reference, { image_url: 'https://media.example.com/cat.png' });
      assert.equal(sentBody().size, '720x1280');
    });

    it('refuses, before any call, what OpenAI cannot express', async () => {
      const image = { type: 'image_url', url: 'https://media.example.com/cat.png', role: 'reference_image' } as const;
      const cases: Array<[VideoGenerationRequest, string]> = [
        [{ ...base, ratio: '1:1', resolution: '720p' }, 'unsupported_size'],
        [{ ...base, ratio: '16:9', resolution: '480p' }, 'unsupported_size'],
        [{ ...base, content: [image, image] }, 'unsupported_reference'],
        [{ ...base, content: [{ ...image, role: 'last_frame' }] }, 'unsupported_reference'],
        [{ ...base, content: [{ type: 'video_url', url: 'https://media.example.com/a.mp4', role: 'reference_video' }] }, 'unsupported_reference'],
        [{ ...base, content: [{ type: 'audio_url', url: 'https://media.example.com/a.mp3', role: 'reference_audio' }] }, 'unsupported_reference'],
      ];
      for (const [request, code] of cases) {
        await assert.rejects(vendor.start(request), (error: unknown) => {
          assert.ok(error instanceof VendorRejectedError);
          assert.equal(error.status, 400);
          assert.equal(error.vendorCode, code);
          return true;
        });
      }
      assert.equal(server.requests.length, 0);
    });
  });

  describe('status', () => {
    const expectations: Array<[string, VendorTaskStatus]> = [
      ['video-queued', { state: 'queued' }],
      ['video-in-progress', { state: 'running', progress: 42 }],
      ['video-completed', { state: 'succeeded' }],
      ['video-failed', { state: 'failed', reason: 'Your request was blocked by our moderation system.', code: 'content_policy_violation', vendorCode: 'moderation_blocked' }],
      ['video-failed-internal', { state: 'failed', reason: 'The video could not be generated.', code: 'generation_failed', vendorCode: 'internal_error' }],
    ];

    for (const [name, expected] of expectations) {
      it(`maps ${name} to ${expected.state}`, async () => {
        server.answer('GET', `${VIDEOS}/${VIDEO_ID}`, { status: 200, body: fixture('openai-videos', name) });
        const status = await vendor.status(VIDEO_ID);
        assert.deepEqual(status, expected);
        const sent = server.requests[0]!;
        assert.equal(sent.method, 'GET');
        assert.equal(sent.path, `${VIDEOS}/${VIDEO_ID}`);
        assert.equal(sent.headers.authorization, 'Bearer sk-test');
      });
    }

    it('reports completed without a videoUrl, so the gateway proxies the download', async () => {
      server.answer('GET', `${VIDEOS}/${VIDEO_ID}`, { status: 200, body: fixture('openai-videos', 'video-completed') });
      assert.equal('videoUrl' in (await vendor.status(VIDEO_ID)), false);
    });

    it('keeps polling (transient) on an unknown status', async () => {
      const video = { ...JSON.parse(fixture('openai-videos', 'video-queued')), status: 'archived' };
      server.answer('GET', `${VIDEOS}/odd`, { status: 200, body: JSON.stringify(video) });
      await assert.rejects(vendor.status('odd'), VendorTransientError);
    });
  });

  describe('cancel', () => {
    it('sends DELETE for the video, and treats one already gone as cancelled', async () => {
      server.answer('DELETE', `${VIDEOS}/${VIDEO_ID}`, { status: 200, body: JSON.stringify({ id: VIDEO_ID, object: 'video.deleted', deleted: true }) });
      await vendor.cancel(VIDEO_ID);
      assert.equal(server.requests[0]!.method, 'DELETE');
      assert.equal(server.requests[0]!.path, `${VIDEOS}/${VIDEO_ID}`);
      assert.equal(server.requests[0]!.headers.authorization, 'Bearer sk-test');
      server.answer('DELETE', `${VIDEOS}/gone`, { status: 404, body: fixture('openai-videos', 'error-404') });
      await vendor.cancel('gone');
    });
  });

  describe('openContent', () => {
    const collect = async (body: AsyncIterable<Uint8Array>) => {
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(Buffer.from(chunk));
      return { bytes: Buffer.concat(chunks), count: chunks.length };
    };

    it('streams the clip bytes from the content endpoint with the vendor key', async () => {
      const clip = randomBytes(256 * 1024);
      server.answer('GET', `${VIDEOS}/${VIDEO_ID}/content`, { status: 200, headers: { 'content-type': 'application/binary' }, body: clip });
      const content = await vendor.openContent!(VIDEO_ID);
      assert.equal(content.contentType, 'video/mp4');
      const received = await collect(content.body);
      assert.ok(received.bytes.equals(clip), 'the bytes arrive unchanged');
      assert.ok(received.count > 1, 'the body arrives as a stream of chunks');
      const sent = server.requests[0]!;
      assert.equal(sent.method, 'GET');
      assert.equal(sent.path, `${VIDEOS}/${VIDEO_ID}/content`);
      assert.equal(sent.headers.authorization, 'Bearer sk-test');
    });

    it('follows a redirect to storage and keeps a vendor video type', async () => {
      const clip = randomBytes(1024);
      server.answer('GET', `${VIDEOS}/${VIDEO_ID}/content`, { status: 302, headers: { location: '/storage/clip.mp4' } });
      server.answer('GET', '/storage/clip.mp4', { status: 200, headers: { 'content-type': 'video/mp4' }, body: clip });
      const content = await vendor.openContent!(VIDEO_ID);
      assert.equal(content.contentType, 'video/mp4');
      assert.ok((await collect(content.body)).bytes.equals(clip));
    });

    it('passes the caller\'s Range and HEAD on, and the vendor\'s part, length and 416 back', async () => {
      server.answer('GET', `${VIDEOS}/${VIDEO_ID}/content`, { status: 206, headers: { 'content-type': 'video/mp4', 'content-range': 'bytes 0-3/1024', 'accept-ranges': 'bytes', 'content-length': '4', etag: '"v1"' }, body: Buffer.from('abcd') });
      const part = await vendor.openContent!(VIDEO_ID, { range: 'bytes=0-3', ifRange: '"v1"' });
      assert.deepEqual([part.status, part.contentRange, part.contentLength, part.acceptRanges, part.etag], [206, 'bytes 0-3/1024', '4', 'bytes', '"v1"']);
      assert.equal((await collect(part.body)).bytes.toString(), 'abcd');
      assert.deepEqual([server.requests[0]!.headers.range, server.requests[0]!.headers['if-range']], ['bytes=0-3', '"v1"']);

      server.answer('GET', `${VIDEOS}/${VIDEO_ID}/content`, { status: 416, headers: { 'content-range': 'bytes */1024' }, body: Buffer.from('') });
      const pastEnd = await vendor.openContent!(VIDEO_ID, { range: 'bytes=2000-' });
      assert.deepEqual([pastEnd.status, pastEnd.contentRange], [416, 'bytes */1024']);

      server.answer('HEAD', `${VIDEOS}/${VIDEO_ID}/content`, { status: 200, headers: { 'content-type': 'video/mp4', 'content-length': '1024' } });
      const head = await vendor.openContent!(VIDEO_ID, { headOnly: true });
      assert.deepEqual([head.status, head.contentLength, server.requests[2]!.method], [200, '1024', 'HEAD']);
    });

    it('asks with GET when the download endpoint refuses HEAD', async () => {
      for (const status of [405, 501]) {
        server.requests.length = 0;
        server.answer('HEAD', `${VIDEOS}/${VIDEO_ID}/content`, { status });
        server.answer('GET', `${VIDEOS}/${VIDEO_ID}/content`, { status: 200, headers: { 'content-type': 'video/mp4', 'content-length': '4' }, body: 'abcd' });
        const head = await vendor.openContent!(VIDEO_ID, { headOnly: true });
        assert.deepEqual([head.status, head.contentLength, server.requests.map((sent) => sent.method)], [200, '4', ['HEAD', 'GET']], String(status));
        await collect(head.body);
      }
    });

    it('takes a 416 for a vendor failure when no range was asked for', async () => {
      server.answer('GET', `${VIDEOS}/${VIDEO_ID}/content`, { status: 416, body: Buffer.from('') });
      await assert.rejects(vendor.openContent!(VIDEO_ID), (error: unknown) => error instanceof VendorRejectedError && error.status === 416);
    });

    it('rejects a missing clip with the vendor status', async () => {
      server.answer('GET', `${VIDEOS}/gone/content`, { status: 404, body: fixture('openai-videos', 'error-404') });
      await assert.rejects(vendor.openContent!('gone'), (error: unknown) => error instanceof VendorRejectedError && error.status === 404);
    });
  });

  describe('errors', () => {
    it('429 with Retry-After: 7 is transient with retryAfterMs 7000', async () => {
      server.answer('POST', VIDEOS, { status: 429, headers: { 'retry-after': '7' }, body: fixture('openai-videos', 'error-429') });
      await assert.rejects(vendor.start({ ...base, seconds: 4 }), (error: unknown) => {
        assert.ok(error instanceof VendorTransientError);
        assert.equal(error.status, 429);
        assert.equal(error.retryAfterMs, 7000);
        return true;
      });
    });

    it('500 and 503 are transient', async () => {
      for (const status of [500, 503]) {
        server.answer('GET', `${VIDEOS}/${VIDEO_ID}`, { status, body: fixture('openai-videos', 'error-500') });
        await assert.rejects(vendor.status(VIDEO_ID), (error: unknown) => error instanceof VendorTransientError && error.status === status);
      }
    });

    it('400 and 401 are rejected with the vendor code', async () => {
      for (const [status, code] of [
        [400, 'invalid_value'],
        [401, 'invalid_api_key'],
      ] as const) {
        server.answer('POST', VIDEOS, { status, body: fixture('openai-videos', `error-${status}`) });
        await assert.rejects(vendor.start({ ...base, seconds: 4 }), (error: unknown) => {
          assert.ok(error instanceof VendorRejectedError);
          assert.equal(error.status, status);
          assert.equal(error.vendorCode, code);
          return true;
        });
      }
    });

    it('a refused connection is transient, for the download too', async () => {
      const unreachable = createOpenAiVideosVendor({ baseUrl: await refusedBaseUrl(), apiKey: 'sk-test' });
      await assert.rejects(unreachable.status(VIDEO_ID), VendorTransientError);
      await assert.rejects(unreachable.openContent!(VIDEO_ID), VendorTransientError);
    });
  });
});
