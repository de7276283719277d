import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createVideoVendor, type VideoVendorProtocol } from '../../vendors/registry.ts';
import { fixture, startRecordingServer, type RecordingServer } from './recording-server.ts';

describe('video vendor registry', () => {
  let server: RecordingServer;
  before(async () => {
    server = await startRecordingServer();
    server.answer('POST', '/api/v3/contents/generations/tasks', { status: 200, body: fixture('seedance', 'create-task') });
    server.answer('POST', '/v1/videos', { status: 200, body: fixture('openai-videos', 'video-queued') });
  });
  after(async () => {
    await server.close();
  });

  const request = { upstreamModel: 'model', prompt: 'a red fox', seconds: 4, ratio: '16:9', resolution: '720p', content: [] };

  it('builds a Seedance adapter that speaks the Ark task API and returns clip URLs itself', async () => {
    const vendor = createVideoVendor('seedance', { baseUrl: server.baseUrl, apiKey: 'ark-key' });
    assert.deepEqual(await vendor.start(request), { vendorTaskId: 'cgt-20260128165237-x7k2p' });
    assert.equal(server.requests.at(-1)!.path, '/api/v3/contents/generations/tasks');
    assert.equal(server.requests.at(-1)!.headers.authorization, 'Bearer ark-key');
    assert.equal(vendor.openContent, undefined);
  });

  it('builds an OpenAI videos adapter that speaks /v1/videos and proxies the clip', async () => {
    const vendor = createVideoVendor('openai-videos', { baseUrl: server.baseUrl, apiKey: 'sk-key' });
    assert.deepEqual(await vendor.start(request), { vendorTaskId: 'video_68d7512d07848190b3e45da0ecbebcde004da08e1e0678d5' });
    assert.equal(server.requests.at(-1)!.path, '/v1/videos');
    assert.equal(server.requests.at(-1)!.headers.authorization, 'Bearer sk-key');
    assert.equal(typeof vendor.openContent, 'function');
  });

  it('refuses a protocol it does not know', () => {
    assert.throws(() => createVideoVendor('openai' as VideoVendorProtocol, { baseUrl: server.baseUrl, apiKey: 'k' }), /unknown video vendor protocol 'openai'/);
  });
});
