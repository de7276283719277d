import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { createSeedanceVideoVendor } from '../../vendors/seedance/seedance-video-vendor.ts';
import { VendorRejectedError, VendorTransientError, type VendorTaskStatus, type VideoVendor } from '../../vendors/types.ts';
import { fixture, refusedBaseUrl, startRecordingServer, type RecordingServer } from './recording-server.ts';

const TASKS = '/api/v3/contents/generations/tasks';
const TASK_ID = 'cgt-20260128165237-x7k2p';

describe('Seedance adapter', () => {
  let server: RecordingServer;
  let vendor: VideoVendor;

  before(async () => {
    server = await startRecordingServer();
    vendor = createSeedanceVideoVendor({ baseUrl: server.baseUrl, apiKey: 'ark-test-key' });
  });
  beforeEach(() => {
    server.requests.length = 0;
  });
  after(async () => {
    await server.close();
  });

  describe('start', () => {
    it('posts the prompt, every reference with its role, and the parameters; never a callback_url', async () => {
      server.answer('POST', TASKS, { status: 200, body: fixture('seedance', 'create-task') });
      const started = await vendor.start({
        upstreamModel: 'dreamina-seedance-2-0-260128',
        prompt: 'The fox from @image1 runs to the beat of the audio',
        seconds: 5,
        ratio: '16:9',
        resolution: '720p',
        generateAudio: true,
        content: [
          { type: 'image_url', url: 'https://media.example.com/fox.png', role: 'reference_image' },
          { type: 'video_url', url: 'https://media.example.com/run.mp4', role: 'reference_video' },
          { type: 'audio_url', url: 'https://media.example.com/beat.mp3', role: 'reference_audio' },
        ],
      });
      assert.deepEqual(started, { vendorTaskId: TASK_ID });

      assert.equal(server.requests.length, 1);
      const sent = server.requests[0]!;
      assert.equal(sent.method, 'POST');
      assert.equal(sent.path, TASKS);
      assert.equal(sent.headers.authorization, 'Bearer ark-test-key');
      assert.equal(sent.headers['content-type'], 'application/json');
      const body = JSON.parse(sent.body) as Record<string, unknown>;
      assert.deepEqual(body, {
        model: 'dreamina-seedance-2-0-260128',
        content: [
          { type: 'text', text: 'The fox from @image1 runs to the beat of the audio' },
          { type: 'image_url', image_url: { url: 'https://media.example.com/fox.png' }, role: 'reference_image' },
          { type: 'video_url', video_url: { url: 'https://media.example.com/run.mp4' }, role: 'reference_video' },
          { type: 'audio_url', audio_url: { url: 'https://media.example.com/beat.mp3' }, role: 'reference_audio' },
        ],
        ratio: '16:9',
        resolution: '720p',
        duration: 5,
        generate_audio: true,
      });
      assert.ok(Number.isInteger(body.duration), 'duration is an integer, not a string');
      assert.equal('callback_url' in body, false);
      assert.doesNotMatch(sent.body, /callback/);
    });

    it('sends first and last frames with their roles, and leaves unset parameters to the model', async () => {
      server.answer('POST', TASKS, { status: 200, body: fixture('seedance', 'create-task') });
      await vendor.start({
        upstreamModel: 'seedance-1-0-pro-250528',
        prompt: 'A door opens slowly',
        content: [
          { type: 'image_url', url: 'https://media.example.com/closed.png', role: 'first_frame' },
          { type: 'image_url', url: 'https://media.example.com/open.png', role: 'last_frame' },
        ],
      });
      assert.deepEqual(JSON.parse(server.requests[0]!.body), {
        model: 'seedance-1-0-pro-250528',
        content: [
          { type: 'text', text: 'A door opens slowly' },
          { type: 'image_url', image_url: { url: 'https://media.example.com/closed.png' }, role: 'first_frame' },
          { type: 'image_url', image_url: { url: 'https://media.example.com/open.png' }, role: 'last_frame' },
        ],
      });
    });

    it('sends generate_audio false when the caller asked for a silent clip', async () => {
      server.answer('POST', TASKS, { status: 200, body: fixture('seedance', 'create-task') });
      await vendor.start({ upstreamModel: 'm', prompt: 'quiet', generateAudio: false, content: [] });
      assert.equal(JSON.parse(server.requests[0]!.body).generate_audio, false);
    });
  });

  describe('status', () => {
    const expectations: Array<[string, VendorTaskStatus]> = [
      ['task-queued', { state: 'queued' }],
      ['task-running', { state: 'running' }],
      [
        'task-succeeded',
        {
          state: 'succeeded',
          videoUrl:
            'https://ark-content-generation-ap-southeast-1.tos-ap-southeast-1.volces.com/dreamina-seedance-2-0/cgt-20260128165237-x7k2p.mp4?X-Tos-Expires=86400',
        },
      ],
      [
        'task-failed',
        {
          state: 'failed',
          reason:
            'The request failed because the output video may contain sensitive information. Request id: 021769590413000fdbdc0b5a4e1c3e7a1b2c3d4e5f6a7b8c9d0e1f',
          code: 'content_policy_violation',
          vendorCode: 'OutputVideoSensitiveContentDetected',
        },
      ],
      [
        'task-failed-internal',
        {
          state: 'failed',
          reason: 'The service encountered an unexpected internal error. Request id: 02176959041300000000000000000000000000000000000000000',
          code: 'generation_failed',
          vendorCode: 'InternalServiceError',
        },
      ],
      ['task-expired', { state: 'failed', reason: 'The task expired at Seedance before it finished.', code: 'generation_expired' }],
      ['task-cancelled', { state: 'failed', reason: 'The task was cancelled at Seedance.', code: 'generation_cancelled' }],
    ];

    for (const [name, expected] of expectations) {
      it(`maps ${name} to ${expected.state}`, async () => {
        server.answer('GET', `${TASKS}/${TASK_ID}`, { status: 200, body: fixture('seedance', name) });
        assert.deepEqual(await vendor.status(TASK_ID), expected);
        const sent = server.requests[0]!;
        assert.equal(sent.method, 'GET');
        assert.equal(sent.path, `${TASKS}/${TASK_ID}`);
        assert.equal(sent.headers.authorization, 'Bearer ark-test-key');
        assert.equal(sent.body, '');
      });
    }

    it('escapes the task id in the path', async () => {
      server.answer('GET', `${TASKS}/a%2Fb%3Fc`, { status: 200, body: fixture('seedance', 'task-queued') });
      assert.deepEqual(await vendor.status('a/b?c'), { state: 'queued' });
    });

    it('keeps polling (transient) when succeeded comes without a video URL, or the status is unknown', async () => {
      const succeeded = JSON.parse(fixture('seedance', 'task-succeeded'));
      delete succeeded.content;
      server.answer('GET', `${TASKS}/no-url`, { status: 200, body: JSON.stringify(succeeded) });
      await assert.rejects(vendor.status('no-url'), VendorTransientError);
      server.answer('GET', `${TASKS}/new-status`, { status: 200, body: JSON.stringify({ ...succeeded, status: 'paused' }) });
      await assert.rejects(vendor.status('new-status'), /unknown task status 'paused'/);
    });
  });

  describe('cancel', () => {
    it('sends DELETE for the task', async () => {
      server.answer('DELETE', `${TASKS}/${TASK_ID}`, { status: 200, body: '{}' });
      await vendor.cancel(TASK_ID);
      assert.equal(server.requests[0]!.method, 'DELETE');
      assert.equal(server.requests[0]!.path, `${TASKS}/${TASK_ID}`);
      assert.equal(server.requests[0]!.headers.authorization, 'Bearer ark-test-key');
    });

    it('treats a task that no longer exists as cancelled', async () => {
      server.answer('DELETE', `${TASKS}/gone`, { status: 404, body: fixture('seedance', 'error-404') });
      await vendor.cancel('gone');
    });
  });

  describe('errors', () => {
    const request = { upstreamModel: 'dreamina-seedance-2-0-260128', prompt: 'a red fox', seconds: 5, content: [] };

    it('429 with Retry-After: 7 is transient with retryAfterMs 7000', async () => {
      server.answer('POST', TASKS, { status: 429, headers: { 'retry-after': '7' }, body: fixture('seedance', 'error-429') });
      await assert.rejects(vendor.start(request), (error: unknown) => {
        assert.ok(error instanceof VendorTransientError);
        assert.equal(error.status, 429);
        assert.equal(error.retryAfterMs, 7000);
        assert.match(error.message, /RateLimitExceeded\.EndpointRPMExceeded/);
        return true;
      });
    });

    it('500 and 503 are transient', async () => {
      for (const status of [500, 503]) {
        server.answer('GET', `${TASKS}/${TASK_ID}`, { status, body: fixture('seedance', 'error-500') });
        await assert.rejects(vendor.status(TASK_ID), (error: unknown) => {
          assert.ok(error instanceof VendorTransientError);
          assert.equal(error.status, status);
          assert.equal(error.retryAfterMs, undefined);
          return true;
        });
      }
    });

    it('400 and 401 are rejected with the vendor code and message', async () => {
      for (const [status, code] of [
        [400, 'InvalidParameter'],
        [401, 'AuthenticationError'],
      ] as const) {
        server.answer('POST', TASKS, { status, body: fixture('seedance', `error-${status}`) });
        await assert.rejects(vendor.start(request), (error: unknown) => {
          assert.ok(error instanceof VendorRejectedError);
          assert.equal(error.status, status);
          assert.equal(error.vendorCode, code);
          assert.match(error.message, new RegExp(`seedance answered ${status} ${code}`));
          return true;
        });
      }
    });

    it('a refused connection is transient', async () => {
      const unreachable = createSeedanceVideoVendor({ baseUrl: await refusedBaseUrl(), apiKey: 'ark-test-key' });
      await assert.rejects(unreachable.start(request), (error: unknown) => {
        assert.ok(error instanceof VendorTransientError);
        assert.equal(error.status, undefined);
        return true;
      });
    });
  });
});
