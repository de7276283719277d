import { z } from 'zod';
import type { Catalog, VideoModel } from '../../../core/catalog.ts';
import { withArticle } from '../../../core/characters.ts';
import type { SubmissionInput } from '../../../core/video-validation.ts';
import type { ReferenceMediaType } from '../../../vendors/types.ts';
import { modelIdRefusal } from '../model-resolution.ts';
import { allowedEntryTypes, contentArrayRules, contentRolesFor, type ContentRoles } from './content-rules.ts';
import { httpUrl, promptField } from './schemas.ts';
import { MAX_CALLER_URL_LENGTH } from '../../../core/outbound-guard.ts';

// The body of POST /v1/video/generations as one schema per catalog model, told apart by
// `model` (spec 4.1, 2.2, 2.3, section 8). Per model it states the seconds, resolutions, ratios,
// audio and reference media the catalog allows, so the OpenAPI document tells a caller exactly
// what each model takes, and a request the document calls valid is one the gateway accepts.
// The route resolves `model` before this schema runs (unknown → 404, not permitted → 403), so
// the union only ever sees a video model's id. Rules across entries and the @imageN citations
// stay in core/video-validation.ts, which the service runs on every submission.

function list(values: readonly (string | number)[]): string {
  return values.join(', ');
}

/** "a", "a or b", "a, b or c". */
function either(values: readonly string[]): string {
  return values.length <= 1 ? values.join('') : `${values.slice(0, -1).join(', ')} or ${values.at(-1)}`;
}

function secondsField(model: VideoModel) {
  const allowed = model.seconds.map(String) as [string, ...string[]];
  return z
    .enum(allowed, {
      error: (issue) =>
        typeof issue.input === 'string' && /^0\d/.test(issue.input)
          ? `must be written without leading zeros: one of ${list(model.seconds)} for '${model.id}'`
          : typeof issue.input === 'string' && /^\d+$/.test(issue.input)
            ? `must be one of ${list(model.seconds)} for '${model.id}'`
            : 'must be a string of digits, e.g. "5"',
    })
    .describe(`Clip length in seconds, as a string of digits. Default "${model.default_seconds}".`);
}

function choiceField(model: VideoModel, values: readonly [string, ...string[]], fallback: string, what: string) {
  return z.enum(values, { error: `must be one of ${list(values)} for '${model.id}'` }).describe(`${what}. Default "${fallback}".`);
}

function audioField(model: VideoModel) {
  if (model.audio) return z.boolean({ error: 'must be a boolean' }).describe('Generate a soundtrack.');
  return z
    .literal(false, { error: `The model '${model.id}' cannot generate audio; omit metadata.generate_audio or set it to false.` })
    .describe('This model generates no audio; only false is accepted.');
}

const ROLE_LABELS: Record<string, string> = {
  reference_image: 'reference images',
  reference_video: 'reference videos',
  reference_audio: 'reference audio',
  first_frame: 'first/last-frame images',
  last_frame: 'first/last-frame images',
};

/** Names what the model lacks when the role is one no entry of this model may take, else lists
 * the roles this entry type allows. */
function roleRefusal(model: VideoModel, type: ReferenceMediaType, roles: ContentRoles, role: unknown): string {
  const allowed = roles[type];
  const takenByAnyType = Object.values(roles).some((typeRoles: string[]) => typeRoles.includes(role as string));
  const label = typeof role === 'string' && !takenByAnyType ? ROLE_LABELS[role] : undefined;
  if (label) return `The model '${model.id}' does not accept ${label}; ${withArticle(type)} entry's role must be ${either(allowed)} here.`;
  return `must be ${either(allowed)} for ${withArticle(type)} entry of '${model.id}'`;
}

function entrySchema(model: VideoModel, type: ReferenceMediaType, roles: ContentRoles) {
  const allowed = roles[type] as [string, ...string[]];
  // Strict, as the body and metadata are: a field the gateway does not read (a `weight`, a
  // `video_url` on an image_url entry) would otherwise be dropped without a word.
  const media = z.strictObject({ url: httpUrl }, { error: `is required for ${withArticle(type)} entry: {"url": "https://…"}` });
  return z.strictObject({
    type: z.literal(type, { error: `must be ${either(allowedEntryTypes(roles))} for '${model.id}'` }),
    [type]: media,
    role: z.enum(allowed, { error: (issue) => roleRefusal(model, type, roles, issue.input) }),
  });
}

function contentField(model: VideoModel) {
  const roles = contentRolesFor(model);
  const types = allowedEntryTypes(roles);
  if (types.length === 0) {
    return z.array(z.unknown(), { error: `must be an array; the model '${model.id}' accepts no reference media, so omit metadata.content` }).max(0, `The model '${model.id}' accepts no reference media (no reference images, videos or audio, no first/last-frame images); omit metadata.content.`);
  }
  const entries = types.map((type) => entrySchema(model, type, roles));
  const entry =
    entries.length === 1
      ? entries[0]!
      : z.discriminatedUnion('type', entries as [(typeof entries)[number], ...(typeof entries)[number][]], {
          error: `must be ${either(types)} for '${model.id}'`,
        });
  return z
    .array(entry, { error: `must be an array of reference media entries (${either(types)}) for '${model.id}'` })
    .max(model.reference.total, `allows at most ${model.reference.total} reference entries in total for '${model.id}'`)
    .meta(contentArrayRules(model))
    .describe('Reference media, in order: reference images (role reference_image) are cited in the prompt as @image1…@imageN, in any case; first/last-frame images are not cited. The vendor fetches each URL: one on an internal address (loopback, private, link-local and the like, unless the operator allows it), written as one, as a localhost name or as a name that resolves to one, is a 400; a name the gateway could not resolve in time is a 503 to retry.');
}

/** `metadata` that is not an object (null, an array); other issues keep their own messages. */
const metadataRefusal = (issue: { code?: string }) =>
  issue.code === 'invalid_type' ? 'must be an object of vendor parameters (ratio, resolution, generate_audio, callback_url, content); omit it for the defaults' : undefined;

function submissionFor(model: VideoModel) {
  return z
    .strictObject({
      model: z.literal(model.id),
      prompt: promptField,
      seconds: secondsField(model).nullish(),
      metadata: z
        .strictObject({
          ratio: choiceField(model, model.ratios as [string, ...string[]], model.default_ratio, 'Aspect ratio').nullish(),
          resolution: choiceField(model, model.resolutions as [string, ...string[]], model.default_resolution, 'Resolution').nullish(),
          generate_audio: audioField(model).nullish(),
          // The worker calls no URL longer than this (core/outbound-guard.ts): refused here, not
          // accepted, billed and never called.
          callback_url: httpUrl.max(MAX_CALLER_URL_LENGTH, `must be at most ${MAX_CALLER_URL_LENGTH} characters`)
            .describe('Webhook address; receives the final task JSON, signed per Standard Webhooks. An address the gateway does not call (loopback, private, link-local and the like, unless the operator allows it), written as one, as a localhost name or as a name that resolves to one, is a 400; a name the gateway could not resolve in time is a 503 to retry.')
            .nullish(),
          content: contentField(model).nullish(),
        }, { error: metadataRefusal })
        .describe('Vendor parameters (spec 2.2).')
        .nullish(),
    })
    .meta({ title: model.id });
}

/** The submission body for every video model of the catalog. Typed as what the service reads:
 * the per-model branches are narrower, which TypeScript cannot follow through computed keys. */
const modelRefusal = modelIdRefusal('video');

type Nullable<T> = { [K in keyof T]: T[K] | null };
type NullableSubmission = Omit<Nullable<SubmissionInput>, 'metadata'> & { metadata?: Nullable<NonNullable<SubmissionInput['metadata']>> | null };

/** A field sent as null is a field left out, as in chat (and as OpenAI clients write an unset
 * parameter): the default applies, and neither the store nor the task's echo keeps the null. */
function withoutNulls(body: NullableSubmission): SubmissionInput {
  const { seconds, metadata, ...rest } = body;
  const submission: SubmissionInput = { ...rest } as SubmissionInput;
  if (seconds !== null && seconds !== undefined) submission.seconds = seconds;
  if (metadata !== null && metadata !== undefined) {
    submission.metadata = Object.fromEntries(Object.entries(metadata).filter(([, value]) => value !== null && value !== undefined));
  }
  return submission;
}

export function videoSubmissionBodyFor(catalog: Catalog): z.ZodType<SubmissionInput> {
  const models = catalog.all().filter((model): model is VideoModel => model.kind === 'video');
  const branches = models.map(submissionFor);
  const [first, ...rest] = branches;
  if (!first) return z.never({ error: 'this gateway serves no video models' });
  const body =
    rest.length === 0
      ? first
      : z.discriminatedUnion('model', [first, ...rest], {
          // The union's issue carries the whole body: what decides is its `model`.
          error: (issue) => modelRefusal({ input: (issue.input as { model?: unknown } | null | undefined)?.model }),
        });
  return body.meta({ examples: models.map(exampleFor) }).transform((parsed) => withoutNulls(parsed as NullableSubmission)) as unknown as z.ZodType<SubmissionInput>;
}

/** A submission each model accepts, for the docs page (and the contract test's first cases). */
function exampleFor(model: VideoModel): SubmissionInput {
  return {
    model: model.id,
    prompt: 'A red fox trots through fresh snow at dawn, steam rising from its breath',
    seconds: String(model.default_seconds),
    metadata: { resolution: model.default_resolution, ratio: model.default_ratio },
  };
}
