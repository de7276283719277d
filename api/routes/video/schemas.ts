import { z } from 'zod';
import { listAfter, listAnswer, listLimit } from '../list-query.ts';
import { visibleText } from '../../../core/characters.ts';

export { httpUrl } from '../http-url.ts';

// Shared pieces of the video routes' schemas. The submission body itself is built per catalog
// model in submission-schema.ts; model-dependent rules across fields live in
// core/video-validation.ts.

export const promptField = visibleText(20_000).describe(
  'What the clip shows. Cite reference images as @image1…@imageN, in the order of metadata.content. For a Seedance model, a setting of the clip written into the text (--dur, --rs, --rt and their long names, --frames, --fps) is a 400: give seconds and metadata instead.',
);

// Any text: an id no task has, however long, is a 404 (spec 7), not a 400.
export const taskParams = z.object({
  task_id: z.string().describe('The task_id the submission returned.'),
});

export const videoTaskView = z.object({
  task_id: z.string(),
  object: z.literal('video.generation'),
  status: z.enum(['submitted', 'running', 'succeeded', 'failed']),
  url: z.string().optional().describe("Where to download the clip, once succeeded: the vendor's own address (public, until the vendor expires it: Seedance's after 24 hours) or, for vendors whose downloads need the vendor's key (sora-2), this gateway's /content address, which needs the API key. /v1/video/generations/{task_id}/content with the key works for every model."),
  format: z.literal('mp4'),
  model: z.string(),
  seconds: z.string(),
  progress: z.number().int().min(0).max(100),
  metadata: z.record(z.string(), z.unknown()),
  error: z
    .object({
      code: z
        .string()
        .describe(
          'Why the task failed, the same words for every vendor: content_policy_violation, generation_failed, generation_expired, generation_cancelled (the vendor ended it); vendor_rejected, vendor_unavailable, deadline_exceeded; insufficient_balance, cancelled.',
        ),
      message: z.string(),
      vendor_code: z.string().optional().describe("The vendor's own code, when the vendor reported the failure with one."),
    })
    .optional(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

export const submissionResponse = z.object({ task_id: z.string(), status: z.literal('submitted') });

// Strict: a misspelt filter (`?state=failed`) would otherwise list every task without a word.
export const taskListQuery = z.strictObject({
  limit: listLimit('tasks', 20, { emptyIsLeftOut: true }),
  after: listAfter('The last task_id of the page before: the page of older tasks that follows it.'),
  // Empty (`?status=`) means every state, as `limit` and `after` read empty values; the
  // document lists '' too, so that what it calls valid is what the route accepts.
  status: z
    .preprocess((value) => (value === '' ? undefined : value), z.enum(['submitted', 'running', 'succeeded', 'failed'], { error: (issue) => (Array.isArray(issue.input) ? 'must be given once' : 'must be submitted, running, succeeded or failed') }).optional())
    .meta({ enum: ['', 'submitted', 'running', 'succeeded', 'failed'] })
    .describe('Only tasks in this state (empty: every state).'),
});

export const taskList = listAnswer(videoTaskView);
