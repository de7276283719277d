import { createVendorHttp } from '../http.ts';
import { isContentPolicyCode, VendorRejectedError, VendorTransientError, type VendorConnection, type VendorTaskStatus, type VideoVendor } from '../types.ts';
import { OPENAI_VIDEOS_PATH, openAiVideo, toOpenAiCreateVideoBody, type OpenAiVideo } from './openai-videos-wire.ts';

export interface OpenAiVideosVendorOptions {
  timeoutMs?: number;
}

/** Maps an OpenAI video object onto our four states. */
function toVendorTaskStatus(video: OpenAiVideo): VendorTaskStatus {
  switch (video.status) {
    case 'queued':
      return { state: 'queued' };
    case 'in_progress': {
      const progress = video.progress;
      return typeof progress === 'number' ? { state: 'running', progress: Math.min(100, Math.max(0, progress)) } : { state: 'running' };
    }
    case 'completed':
      // No videoUrl: the clip is only downloadable with the vendor key, so the gateway streams
      // it to the caller through openContent instead of handing out a URL.
      return { state: 'succeeded' };
    case 'failed': {
      const vendorCode = video.error?.code ?? undefined;
      return {
        state: 'failed',
        reason: video.error?.message ?? 'OpenAI reported the video failed without a reason.',
        code: isContentPolicyCode(vendorCode) ? 'content_policy_violation' : 'generation_failed',
        ...(vendorCode !== undefined ? { vendorCode } : {}),
      };
    }
    default:
      // A status this adapter does not know yet: keep polling rather than guess a final state.
      throw new VendorTransientError(`openai-videos answered an unknown video status '${video.status}'`);
  }
}

// The spec documents the clip as `application/binary`; our public format is mp4, so anything
// that is not explicitly a video type is served as video/mp4.
function clipContentType(vendorType: string | undefined): string {
  return vendorType?.startsWith('video/') ? vendorType : 'video/mp4';
}

export function createOpenAiVideosVendor(connection: VendorConnection, options: OpenAiVideosVendorOptions = {}): VideoVendor {
  const http = createVendorHttp({ vendor: 'openai-videos', baseUrl: connection.baseUrl, apiKey: connection.apiKey, timeoutMs: options.timeoutMs });
  const videoPath = (vendorTaskId: string) => `${OPENAI_VIDEOS_PATH}/${encodeURIComponent(vendorTaskId)}`;

  return {
    async start(request, idempotencyKey) {
      // Built first: a request OpenAI cannot express is refused before any call is made.
      const body = toOpenAiCreateVideoBody(request);
      const created = await http.json('POST', OPENAI_VIDEOS_PATH, openAiVideo, body, idempotencyKey);
      return { vendorTaskId: created.id };
    },

    async status(vendorTaskId) {
      return toVendorTaskStatus(await http.json('GET', videoPath(vendorTaskId), openAiVideo));
    },

    async cancel(vendorTaskId) {
      // DELETE is the API's only way to stop and discard a video.
      await http.deleteUnlessGone(videoPath(vendorTaskId));
    },

    async openContent(vendorTaskId, ask = {}) {
      const path = `${videoPath(vendorTaskId)}/content`;
      const get = () => http.stream(path, { range: ask.range, ifRange: ask.ifRange });
      // HEAD spares downloading a clip only to drop it; a download endpoint that does not take
      // HEAD (405, 501) gets the GET, whose body the caller's HEAD answer leaves out.
      const content = ask.headOnly
        ? await http.stream(path, { method: 'HEAD', range: ask.range, ifRange: ask.ifRange }).catch((error: unknown) => {
            if ((error instanceof VendorRejectedError || error instanceof VendorTransientError) && (error.status === 405 || error.status === 501)) return get();
            throw error;
          })
        : await get();
      const { contentType, ...sent } = content.headers;
      const status = content.status === 206 || content.status === 416 ? content.status : 200;
      return { status, body: content.body, contentType: clipContentType(contentType), ...sent };
    },
  };
}
