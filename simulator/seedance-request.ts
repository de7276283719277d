import { z } from 'zod';
import { firstProblem, type ParameterProblem } from './validation.ts';

// The body of ModelArk's "create a video generation task", as documented for Seedance:
// a content array mixing one text prompt with reference media, each with a role. Unknown
// top-level fields are ignored (newer parameters such as `watermark` must not break us);
// the fields we know are checked as strictly as the vendor does.

const mediaAddress = z.object({ url: z.string().min(1) });

const contentItem = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({
    type: z.literal('image_url'),
    image_url: mediaAddress,
    role: z.enum(['reference_image', 'first_frame', 'last_frame']).optional(),
  }),
  z.object({ type: z.literal('video_url'), video_url: mediaAddress, role: z.literal('reference_video').optional() }),
  z.object({ type: z.literal('audio_url'), audio_url: mediaAddress, role: z.literal('reference_audio').optional() }),
]);

export const seedanceRatios = ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9', 'adaptive', 'keep_ratio'] as const;
export const seedanceResolutions = ['480p', '720p', '1080p'] as const;

const createTaskBody = z.object({
  model: z.string().min(1),
  content: z.array(contentItem).min(1),
  ratio: z.enum(seedanceRatios).optional(),
  resolution: z.enum(seedanceResolutions).optional(),
  // -1 asks the model to choose the length itself.
  duration: z
    .number()
    .int()
    .refine((seconds) => seconds === -1 || (seconds >= 2 && seconds <= 15), 'must be between 2 and 15, or -1')
    .optional(),
  generate_audio: z.boolean().optional(),
  callback_url: z.url().optional(),
  seed: z.number().int().min(-1).max(4_294_967_295).optional(),
});

export type CreateTaskBody = z.infer<typeof createTaskBody>;
type ContentItem = CreateTaskBody['content'][number];

const referenceLimits = { reference_image: 9, reference_video: 3, reference_audio: 3 } as const;

function roleOf(item: ContentItem): string | undefined {
  if (item.type === 'text') return undefined;
  // Without a role an image is a first frame, video and audio are references.
  return item.role ?? (item.type === 'image_url' ? 'first_frame' : `reference_${item.type.replace('_url', '')}`);
}

/** Checks across content entries that a schema cannot express; returns what is wrong. */
function contentProblem(content: ContentItem[]): string | undefined {
  const counts = new Map<string, number>();
  for (const item of content) {
    const role = roleOf(item) ?? 'text';
    counts.set(role, (counts.get(role) ?? 0) + 1);
  }
  const count = (role: string) => counts.get(role) ?? 0;
  if (count('text') > 1) return 'At most one text item is allowed in content.';
  if (count('text') === 0 && count('first_frame') + count('reference_image') === 0) {
    return 'content must hold a text prompt or an image.';
  }
  for (const [role, limit] of Object.entries(referenceLimits)) {
    if (count(role) > limit) return `At most ${limit} items with role ${role} are allowed, got ${count(role)}.`;
  }
  if (count('first_frame') > 1 || count('last_frame') > 1) {
    return 'At most one first_frame and one last_frame image are allowed.';
  }
  if (count('last_frame') > 0 && count('first_frame') === 0) {
    return 'A last_frame image requires a first_frame image.';
  }
  if (count('first_frame') > 0 && count('reference_image') > 0) {
    return 'Reference images cannot be combined with first/last frame images.';
  }
  return undefined;
}

export type ParsedCreateTask = { ok: true; body: CreateTaskBody; prompt: string } | { ok: false; problem: ParameterProblem };

export function parseCreateTask(raw: unknown): ParsedCreateTask {
  const parsed = createTaskBody.safeParse(raw);
  if (!parsed.success) return { ok: false, problem: firstProblem(parsed.error) };
  const problem = contentProblem(parsed.data.content);
  if (problem) return { ok: false, problem: { param: 'content', message: problem, reason: problem } };
  const prompt = parsed.data.content.flatMap((item) => (item.type === 'text' ? [item.text] : [])).join('\n');
  return { ok: true, body: parsed.data, prompt };
}
