import { z } from 'zod';
import type { ReferenceMedia, VideoGenerationRequest } from '../types.ts';

// Seedance's wire format on BytePlus ModelArk / Volcengine Ark ("Video Generation API":
// POST/GET/DELETE /api/v3/contents/generations/tasks). Our request shape is strict and built
// from scratch; the vendor's responses are read leniently so that a new field never breaks us.

export const SEEDANCE_TASKS_PATH = '/api/v3/contents/generations/tasks';

type SeedanceContentItem =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string }; role: ReferenceMedia['role'] }
  | { type: 'video_url'; video_url: { url: string }; role: ReferenceMedia['role'] }
  | { type: 'audio_url'; audio_url: { url: string }; role: ReferenceMedia['role'] };

export interface SeedanceCreateTaskBody {
  model: string;
  content: SeedanceContentItem[];
  ratio?: string;
  resolution?: string;
  /** Whole seconds; Seedance takes an integer. */
  duration?: number;
  generate_audio?: boolean;
  // No callback_url, deliberately: the gateway polls and delivers its own signed webhooks, and
  // a caller's URL must never reach the vendor.
}

function toContentItem(media: ReferenceMedia): SeedanceContentItem {
  // Our role names are Seedance's own (first_frame, last_frame, reference_image/_video/_audio).
  switch (media.type) {
    case 'image_url':
      return { type: 'image_url', image_url: { url: media.url }, role: media.role };
    case 'video_url':
      return { type: 'video_url', video_url: { url: media.url }, role: media.role };
    case 'audio_url':
      return { type: 'audio_url', audio_url: { url: media.url }, role: media.role };
  }
}

export function toSeedanceCreateTaskBody(request: VideoGenerationRequest): SeedanceCreateTaskBody {
  const body: SeedanceCreateTaskBody = {
    model: request.upstreamModel,
    content: [{ type: 'text', text: request.prompt }, ...request.content.map(toContentItem)],
  };
  // Optional parameters are left out when unset so that the model's own defaults apply
  // (older Seedance models reject generate_audio, for instance).
  if (request.ratio !== undefined) body.ratio = request.ratio;
  if (request.resolution !== undefined) body.resolution = request.resolution;
  if (request.seconds !== undefined) body.duration = request.seconds;
  if (request.generateAudio !== undefined) body.generate_audio = request.generateAudio;
  return body;
}

export const seedanceCreatedTask = z.looseObject({ id: z.string().min(1) });

export const seedanceTask = z.looseObject({
  id: z.string().nullish(),
  model: z.string().nullish(),
  // A plain string: an unknown status is handled by the mapping, not rejected by the parser.
  status: z.string(),
  content: z.looseObject({ video_url: z.string().nullish() }).nullish(),
  error: z
    .looseObject({
      code: z.string().nullish(),
      message: z.string().nullish(),
    })
    .nullish(),
});

export type SeedanceTask = z.infer<typeof seedanceTask>;
