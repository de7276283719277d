import { z } from 'zod';

// OpenAI's image generation request (spec 4.5 leaves the shape to OpenAI's). Loose, so vendor
// parameters not named here (quality, style, background, user, ...) reach the upstream.

export const imageGenerationBody = z.looseObject({
  model: z.string({ error: 'is required' }).min(1, 'is required'),
  prompt: z.string({ error: 'is required' }).trim().min(1, 'must not be empty').max(32_000, 'is longer than 32000 characters'),
  n: z.number({ error: 'must be an integer from 1 to 10' }).int('must be an integer from 1 to 10').min(1, 'must be from 1 to 10').max(10, 'must be from 1 to 10').nullish(),
  size: z.string({ error: 'must be a string such as "1024x1024"' }).regex(/^(auto|\d{2,5}x\d{2,5})$/, 'must be "auto" or WIDTHxHEIGHT, e.g. "1024x1024"').nullish(),
  response_format: z.enum(['url', 'b64_json'], { error: "must be 'url' or 'b64_json'" }).nullish(),
});

export type ImageGenerationRequest = z.infer<typeof imageGenerationBody>;

// Documents the answer; the route sends the upstream's JSON text, which skips serialization.
export const imageGenerationResponse = z.looseObject({
  created: z.number().int(),
  data: z.array(z.looseObject({ url: z.string().optional(), b64_json: z.string().optional(), revised_prompt: z.string().optional() })),
});
