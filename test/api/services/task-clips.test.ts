import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openClip } from '../../../api/services/task-clips.ts';
import { GatewayError } from '../../../core/errors.ts';
import type { TaskDocument } from '../../../store/tasks.ts';
import { VendorRejectedError, VendorTransientError, type VideoVendor } from '../../../vendors/types.ts';

// A clip only the vendor can serve is streamed from it; when the vendor fails, the caller gets a
// 502 in the gateway's words, and the vendor's (its hosts, the operator's account) go to the log.

const task = { _id: 'task_c', status: 'succeeded', model: 'sora-2', vendor_task_id: 'video_1' } as TaskDocument;

function failingWith(error: Error) {
  const vendor = { openContent: async () => Promise.reject(error) } as unknown as VideoVendor;
  return { vendorFor: () => vendor, upstreamOf: () => 'openai-videos' };
}

describe('clips the gateway streams from the vendor', () => {
  // A refusal stays until the operator acts: the caller is told not to retry (and the error
  // handler logs it as an error, a failure that may pass as a warning).
  for (const [label, error, words, shouldRetry] of [
    ['unreachable', new VendorTransientError('openai-videos: GET /v1/videos/video_1/content got no answer: ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:8443'), 'could not be reached; retry later', undefined],
    ['failing', new VendorTransientError('openai-videos answered 500 server_error: proxy 10.20.30.40:8443 failed for org-Operator123', 500), 'answered 500; retry later', undefined],
    ['refusing', new VendorRejectedError('openai-videos answered 403: project proj_secret may not read this video', 403), 'answered 403; the operator has been told', 'false'],
  ] as const) {
    it(`answers a ${label} vendor with a 502 that names no host or account, and keeps the vendor's words for the log`, async () => {
      await assert.rejects(openClip(task, failingWith(error)), (thrown: unknown) => {
        assert.ok(thrown instanceof GatewayError);
        assert.equal(thrown.status, 502);
        assert.equal(thrown.message, `The vendor ${words.replace(';', ' and could not deliver the clip;')}.`);
        assert.equal(thrown.headers['x-should-retry'], shouldRetry);
        assert.equal((thrown as GatewayError & { upstream: { message: string } }).upstream.message, error.message);
        return true;
      });
    });
  }

  it('answers a clip the vendor no longer has with a 404, which clients do not retry', async () => {
    for (const status of [404, 410]) {
      await assert.rejects(openClip(task, failingWith(new VendorRejectedError(`openai-videos answered ${status}`, status))), (thrown: unknown) => {
        assert.ok(thrown instanceof GatewayError);
        assert.deepEqual([thrown.status, thrown.code, thrown.message], [404, 'clip_not_found', 'The clip of this task is no longer available at the vendor.']);
        return true;
      });
    }
  });

  it('answers 409 for a task without a clip: to wait while it runs, not to wait once it failed', async () => {
    const never = failingWith(new Error('the vendor is not asked'));
    for (const [status, message] of [
      ['running', /is running; its clip is downloadable once it has succeeded/],
      ['failed', /failed, so it has no clip; see its error/],
    ] as const) {
      await assert.rejects(openClip({ ...task, status } as TaskDocument, never), (thrown: unknown) => {
        assert.ok(thrown instanceof GatewayError);
        assert.equal(thrown.status, 409);
        assert.match(thrown.message, message);
        // OpenAI's clients retry a 409 at once (3 tries in 1.5 s) unless told not to.
        assert.equal(thrown.headers['x-should-retry'], 'false');
        return true;
      });
    }
  });
});
