import { z } from 'zod';
import type { Catalog, ImageModel } from '../../../core/catalog.ts';
import { requiredAs, visibleUntrimmedText } from '../../../core/characters.ts';
import { modelIdField } from '../model-resolution.ts';

// OpenAI's image generation request (spec 4.5 leaves the shape to OpenAI's). Loose, so vendor
// parameters not named here (quality, style, background, user, ...) reach the upstream.

export const imageGenerationBody = z.looseObject({
  model: z.string({ error: requiredAs('a string') }).min(1, 'is required'),
  // Passed on as written: OpenAI does not trim a prompt.
  prompt: visibleUntrimmedText(32_000),
  n: z.number({ error: 'must be an integer from 1 to 10' }).int('must be an integer from 1 to 10').min(1, 'must be from 1 to 10').max(10, 'must be from 1 to 10').nullish(),
  size: z.string({ error: 'must be a string such as "1024x1024"' }).regex(/^(auto|\d{2,5}x\d{2,5})$/, 'must be "auto" or WIDTHxHEIGHT, e.g. "1024x1024"').nullish(),
  response_format: z.enum(['url', 'b64_json'], { error: "must be 'url' or 'b64_json'" }).nullish(),
  // The gateway reads an image answer whole, to count and bill its images: a provider's event
  // stream would reach it unreadable, after the provider had done (and charged for) the work.
  stream: z.literal(false, { error: 'is not supported here: images are answered whole (leave it out, or false)' }).nullish(),
});

export type ImageGenerationRequest = z.infer<typeof imageGenerationBody>;

/** The values every image model of the catalog takes together, when each lists its own (a
 * model that lists none takes any, and then so does the field). */
function listedByAll(models: ImageModel[], field: 'sizes' | 'qualities'): [string, ...string[]] | null {
  if (models.length === 0 || models.some((model) => !model[field])) return null;
  const values = [...new Set(models.flatMap((model) => model[field]!))];
  return values.length > 0 ? (values as [string, ...string[]]) : null;
}

/** A priced pair's quality: the model's default also stands for a quality left out, null, or
 * not a string (image-proxy.ts reads only a string). */
function qualityIs(quality: string, fallback: string): object {
  return quality === fallback ? { properties: { quality: { anyOf: [{ const: quality }, { not: { type: 'string' } }] } } } : { required: ['quality'], properties: { quality: { const: quality } } };
}

/** A priced pair's size: the model's default also stands for a size left out or null. */
function sizeIs(size: string, fallback: string): object {
  return size === fallback ? { properties: { size: { enum: [size, null] } } } : { required: ['size'], properties: { size: { const: size } } };
}

/** One image model's own rules, for the document only (JSON Schema `if`/`then` on `model`): the
 * sizes and qualities it makes, and for a model priced by quality and size the pairs it has a
 * price for. The route checks them when the model is resolved (image-proxy.ts); a body the
 * document calls valid must be one the gateway accepts. */
function imageModelRules(model: ImageModel): object | undefined {
  const rules: object[] = [];
  const made: Record<string, object> = {};
  if (model.sizes) made.size = { enum: [...model.sizes, null] };
  if (model.qualities) made.quality = { enum: [...model.qualities, null] };
  if (Object.keys(made).length > 0) rules.push({ properties: made });
  if (model.prices_per_image_micros) {
    const pairs = Object.keys(model.prices_per_image_micros).map((key) => key.split(' ') as [string, string]);
    rules.push({ anyOf: pairs.map(([quality, size]) => ({ allOf: [qualityIs(quality, model.default_quality), sizeIs(size, model.default_size)] })) });
  }
  if (rules.length === 0) return undefined;
  return { if: { properties: { model: { const: model.id } } }, then: rules.length === 1 ? rules[0] : { allOf: rules } };
}

/** The body as the route checks and documents it: `model` lists the catalog's image models, and
 * `size` and `quality` the values they make, where they list them (each model's own are checked
 * again when it is resolved, image-proxy.ts, and documented per model). */
export function imageGenerationBodyFor(catalog: Catalog) {
  const imageModels = catalog.all().filter((model): model is ImageModel => model.kind === 'image');
  const examples = imageModels[0] ? [{ model: imageModels[0].id, prompt: 'A lighthouse in watercolour, morning light', size: '1024x1024' }] : [];
  const sizes = listedByAll(imageModels, 'sizes');
  const qualities = listedByAll(imageModels, 'qualities');
  const quoted = (values: string[]) => values.map((value) => `'${value}'`).join(', ');
  const perModel = imageModels.map(imageModelRules).filter((rules) => rules !== undefined);
  return imageGenerationBody
    .extend({
      model: modelIdField(catalog, 'image'),
      size: sizes ? z.enum(sizes, { error: `must be one of ${quoted(sizes)}` }).nullish() : imageGenerationBody.shape.size,
      // Not named by the base body (any value passes to the upstream) unless listed.
      quality: qualities ? z.enum(qualities, { error: `must be one of ${quoted(qualities)}` }).nullish() : z.unknown().optional(),
    })
    .meta({ examples, ...(perModel.length > 0 ? { allOf: perModel } : {}) });
}

// Documents the answer; the route sends the upstream's JSON text, which skips serialization.
export const imageGenerationResponse = z.looseObject({
  created: z.number().int(),
  data: z.array(z.looseObject({ url: z.string().optional(), b64_json: z.string().optional(), revised_prompt: z.string().optional() })),
});
