import { z } from 'zod';

// The shape of a submission (spec 4.1, 2.2, 2.3). Rules that depend on the model (allowed
// seconds, resolutions, reference caps) live in core/video-validation.ts.

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' });

const mediaEntry = z
  .object({
    type: z.enum(['image_url', 'video_url', 'audio_url'], { error: 'must be image_url, video_url or audio_url' }),
    role: z.string({ error: 'is required' }),
    image_url: z.object({ url: httpUrl }, { error: 'must be an object with a url' }).optional(),
    video_url: z.object({ url: httpUrl }, { error: 'must be an object with a url' }).optional(),
    audio_url: z.object({ url: httpUrl }, { error: 'must be an object with a url' }).optional(),
  })
  .superRefine((entry, context) => {
    if (!entry[entry.type]) {
      context.addIssue({ code: 'custom', path: [entry.type], message: `is required for a ${entry.type} entry: {"url": "https://…"}` });
    }
  });

export const videoMetadataSchema = z.strictObject({
  ratio: z.string().optional(),
  resolution: z.string().optional(),
  generate_audio: z.boolean().optional(),
  callback_url: httpUrl.optional(),
  content: z.array(mediaEntry).max(100, 'has too many entries').optional(),
});

export const videoSubmissionBody = z.strictObject({
  model: z.string({ error: 'is required' }).min(1, 'is required'),
  prompt: z.string({ error: 'is required' }).trim().min(1, 'must not be empty').max(20_000, 'is longer than 20000 characters'),
  seconds: z.string({ error: 'must be a string of digits, e.g. "5"' }).regex(/^\d{1,4}$/, 'must be a string of digits, e.g. "5"').optional(),
  metadata: videoMetadataSchema.optional(),
});

export type VideoSubmission = z.infer<typeof videoSubmissionBody>;

export const taskParams = z.object({ task_id: z.string().min(1).max(100) });

export const videoTaskView = z.object({
  task_id: z.string(),
  object: z.literal('video.generation'),
  status: z.enum(['submitted', 'running', 'succeeded', 'failed']),
  url: z.string().optional(),
  format: z.literal('mp4'),
  model: z.string(),
  seconds: z.string(),
  progress: z.number().int().min(0).max(100),
  metadata: z.record(z.string(), z.unknown()),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

export const submissionResponse = z.object({ task_id: z.string(), status: z.literal('submitted') });
