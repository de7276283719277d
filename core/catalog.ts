import { readFileSync } from 'node:fs';
import { z } from 'zod';

// The model catalog is data: which ids exist, what kind they are, which upstream serves them,
// their limits and their prices. Local and production deployments differ only in the file
// (CATALOG_FILE) and the environment it interpolates (`${VAR}` or `${VAR:-default}`).

const upstreamSchema = z.object({
  protocol: z.enum(['seedance', 'openai-videos', 'openai']),
  base_url: z.string().url(),
  api_key: z.string(),
});

const referenceCapsSchema = z.object({
  images: z.number().int().min(0),
  videos: z.number().int().min(0),
  audios: z.number().int().min(0),
  total: z.number().int().min(0),
  /** first_frame / last_frame image entries allowed (mutually exclusive with reference images). */
  frames: z.boolean(),
});

const videoModelSchema = z.object({
  id: z.string(),
  kind: z.literal('video'),
  upstream: z.string(),
  upstream_model: z.string(),
  owned_by: z.string(),
  seconds: z.array(z.number().int().positive()).nonempty(),
  default_seconds: z.number().int().positive(),
  resolutions: z.array(z.enum(['480p', '720p', '1080p'])).nonempty(),
  default_resolution: z.enum(['480p', '720p', '1080p']),
  ratios: z.array(z.string()).nonempty(),
  default_ratio: z.string(),
  audio: z.boolean(),
  reference: referenceCapsSchema,
  /** Price per second of clip, by resolution, in micro-USD. */
  price_per_second_micros: z.record(z.string(), z.number().int().min(0)),
});

// A high-detail image at its largest: about 1,450 tokens on gpt-4o and 2,500 on gpt-4.1's
// patch-based models. gpt-4o-mini bills the same images at about 33 times as many tokens (at a
// lower price per token), so its catalog entry says so.
const DEFAULT_IMAGE_INPUT_TOKENS = 2_500;

const chatModelSchema = z.object({
  id: z.string(),
  kind: z.literal('chat'),
  upstream: z.string(),
  upstream_model: z.string(),
  owned_by: z.string(),
  tools: z.boolean(),
  max_output_tokens: z.number().int().positive(),
  /** The most input tokens the provider bills for one image in a message: its reservation
   * counts each image part as this many (core/chat-pricing.ts). */
  image_input_tokens: z.number().int().min(0).default(DEFAULT_IMAGE_INPUT_TOKENS),
  price_per_million_input_tokens_micros: z.number().int().min(0),
  price_per_million_output_tokens_micros: z.number().int().min(0),
  /** Audio in and out (`input_audio` parts, `modalities: ["audio"]`) is billed as the upstream
   * counts it, at the prices above: true for a self-hosted audio model. OpenAI bills audio at
   * other prices, so without it audio is refused (api/services/openai-proxy/chat-audio.ts). */
  audio_as_tokens: z.boolean().default(false),
});

const imageModelSchema = z.object({
  id: z.string(),
  kind: z.literal('image'),
  upstream: z.string(),
  upstream_model: z.string(),
  owned_by: z.string(),
  /** What every image costs, for a model without prices_per_image_micros (one of the two is
   * required; with the table, this is not read). */
  price_per_image_micros: z.number().int().min(0).optional(),
  /** Prices by quality and size, keyed `"<quality> <size>"` (`"high 1536x1024"`), for providers
   * that charge by both: a request whose quality and size (or the defaults below) have no price
   * here is refused. Without it every image costs price_per_image_micros. */
  prices_per_image_micros: z
    .record(z.string().regex(/^\S+ \S+$/, 'keys are "<quality> <size>"'), z.number().int().min(0))
    .refine((prices) => Object.keys(prices).length > 0, 'must price at least one "<quality> <size>" pair')
    .optional(),
  /** What a request that names no quality or size gets (OpenAI's default is auto for both). */
  default_quality: z.string().default('auto'),
  default_size: z.string().default('auto'),
  /** The sizes and qualities the model makes, where the provider refuses others (gpt-image-1
   * takes three sizes and auto): another is a 400 before anything is held, not an image billed
   * that the provider would not have made. Left out, any is passed on. */
  sizes: z.array(z.string()).min(1).optional(),
  qualities: z.array(z.string()).min(1).optional(),
});

const modelSchema = z.discriminatedUnion('kind', [videoModelSchema, chatModelSchema, imageModelSchema]);

const catalogSchema = z
  .object({
    created: z.number().int(),
    upstreams: z.record(z.string(), upstreamSchema),
    models: z.array(modelSchema),
  })
  .superRefine((catalog, context) => {
    const seen = new Set<string>();
    for (const model of catalog.models) {
      if (seen.has(model.id)) context.addIssue({ code: 'custom', message: `duplicate model id ${model.id}` });
      seen.add(model.id);
      if (!catalog.upstreams[model.upstream]) {
        context.addIssue({ code: 'custom', message: `model ${model.id} names unknown upstream ${model.upstream}` });
      }
      if (model.kind === 'image' && model.price_per_image_micros === undefined && !model.prices_per_image_micros) {
        context.addIssue({ code: 'custom', message: `image model ${model.id} has no price: give price_per_image_micros, or prices_per_image_micros by quality and size` });
      }
    }
  });

export type Upstream = z.infer<typeof upstreamSchema>;
export type VideoModel = z.infer<typeof videoModelSchema>;
export type ChatModel = z.infer<typeof chatModelSchema>;
export type ImageModel = z.infer<typeof imageModelSchema>;
export type CatalogModel = z.infer<typeof modelSchema>;
export type CatalogData = z.infer<typeof catalogSchema>;

/** An upstream the catalog does not have (removed while its tasks still ran, say), or has for
 * another protocol: asking again cannot help. */
export class UpstreamNotConfiguredError extends Error {
  override readonly name = 'UpstreamNotConfiguredError';
}

export class Catalog {
  private readonly byId: Map<string, CatalogModel>;

  constructor(readonly data: CatalogData) {
    this.byId = new Map(data.models.map((model) => [model.id, model]));
  }

  find(modelId: string): CatalogModel | undefined {
    return this.byId.get(modelId);
  }

  all(): CatalogModel[] {
    return this.data.models;
  }

  upstream(name: string): Upstream {
    const upstream = this.data.upstreams[name];
    if (!upstream) throw new UpstreamNotConfiguredError(`the upstream '${name}' is not in the gateway's catalog`);
    return upstream;
  }
}

const PLACEHOLDER = /\$\{([A-Z0-9_]+)(?::-([^}]*))?\}/g;

function interpolate(value: unknown, environment: NodeJS.ProcessEnv): unknown {
  if (typeof value === 'string') {
    return value.replace(PLACEHOLDER, (_match, name: string, fallback: string | undefined) => {
      const found = environment[name];
      if (found !== undefined && found !== '') return found;
      if (fallback !== undefined) return fallback;
      throw new Error(`catalog needs environment variable ${name}`);
    });
  }
  if (Array.isArray(value)) return value.map((item) => interpolate(item, environment));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, interpolate(item, environment)]));
  }
  return value;
}

export function parseCatalog(raw: unknown, environment: NodeJS.ProcessEnv = process.env): Catalog {
  const parsed = catalogSchema.safeParse(interpolate(raw, environment));
  if (!parsed.success) {
    throw new Error(`Invalid model catalog: ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
  }
  return new Catalog(parsed.data);
}

export function loadCatalog(file: string, environment: NodeJS.ProcessEnv = process.env): Catalog {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`CATALOG_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`CATALOG_FILE: ${file} is not JSON (${(error as Error).message})`);
  }
  return parseCatalog(json, environment);
}
