import { z } from 'zod';
import { VendorRejectedError, type VideoGenerationRequest } from '../types.ts';

// OpenAI's videos API (Sora): POST /v1/videos with the JSON body `CreateVideoJsonBody` of the
// OpenAPI spec, GET /v1/videos/{id}, GET /v1/videos/{id}/content, DELETE /v1/videos/{id}.

export const OPENAI_VIDEOS_PATH = '/v1/videos';

export interface OpenAiCreateVideoBody {
  model: string;
  prompt: string;
  /** The spec types seconds as a string enum ("4", "8", "12"), not a number. */
  seconds?: string;
  size?: string;
  input_reference?: { image_url: string };
}

// The spec's VideoSize enum has exactly four values: 1280x720 and 720x1280 (sora-2 and
// sora-2-pro) and 1792x1024 and 1024x1792 (sora-2-pro's higher tier). There is no 1920x1080
// and no square size, so 1080p maps to the higher tier and other ratios are refused here,
// before a call that the vendor would refuse anyway after the caller's balance was held.
const SIZE_BY_RATIO_AND_RESOLUTION: Record<string, string> = {
  '16:9 720p': '1280x720',
  '9:16 720p': '720x1280',
  '16:9 1080p': '1792x1024',
  '9:16 1080p': '1024x1792',
};

function refuse(message: string, vendorCode: string): never {
  // 400: the same verdict the vendor would give, reached without spending a call.
  throw new VendorRejectedError(`openai-videos: ${message}`, 400, vendorCode);
}

function toSize(request: VideoGenerationRequest): string | undefined {
  // Neither given: let the vendor apply its documented default size.
  if (request.ratio === undefined && request.resolution === undefined) return undefined;
  const key = `${request.ratio ?? '16:9'} ${request.resolution ?? '720p'}`;
  const size = SIZE_BY_RATIO_AND_RESOLUTION[key];
  if (!size) {
    refuse(`no OpenAI video size for ratio ${request.ratio ?? '16:9'} at ${request.resolution ?? '720p'}; supported: ${Object.keys(SIZE_BY_RATIO_AND_RESOLUTION).join(', ')}`, 'unsupported_size');
  }
  return size;
}

function toInputReference(request: VideoGenerationRequest): OpenAiCreateVideoBody['input_reference'] {
  if (request.content.length === 0) return undefined;
  // The JSON body takes one image, by URL ({image_url}); Sora starts the clip from it. There
  // is no slot for videos, audio or a last frame, and dropping them silently would bill the
  // caller for a clip that ignored what they sent.
  const [first, ...rest] = request.content;
  if (rest.length > 0 || !first || first.type !== 'image_url' || first.role === 'last_frame') {
    refuse('accepts at most one reference image (role first_frame or reference_image), and no video, audio or last frame', 'unsupported_reference');
  }
  return { image_url: first.url };
}

export function toOpenAiCreateVideoBody(request: VideoGenerationRequest): OpenAiCreateVideoBody {
  const body: OpenAiCreateVideoBody = { model: request.upstreamModel, prompt: request.prompt };
  if (request.seconds !== undefined) body.seconds = String(request.seconds);
  const size = toSize(request);
  if (size !== undefined) body.size = size;
  const inputReference = toInputReference(request);
  if (inputReference !== undefined) body.input_reference = inputReference;
  // generateAudio has no counterpart: Sora decides the soundtrack itself.
  return body;
}

export const openAiVideo = z.looseObject({
  id: z.string().min(1),
  object: z.string().nullish(),
  // A plain string: an unknown status is handled by the mapping, not rejected by the parser.
  status: z.string(),
  progress: z.number().nullish(),
  error: z
    .looseObject({
      code: z.string().nullish(),
      message: z.string().nullish(),
    })
    .nullish(),
});

export type OpenAiVideo = z.infer<typeof openAiVideo>;
