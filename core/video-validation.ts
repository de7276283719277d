import type { Upstream, VideoModel } from './catalog.ts';
import { GatewayError } from './errors.ts';
import { withArticle } from './characters.ts';
import type { ReferenceMedia, VideoGenerationRequest } from '../vendors/types.ts';

// Model-dependent rules for a video submission (spec 4.1 rules 1-4 and section 8). Each
// refusal is a 400 that names the field, so a caller can fix the request without guessing.

/** Spec section 8: per-request caps, whatever the model allows. */
export const SPEC_REFERENCE_CAPS = { images: 9, videos: 3, audios: 3 } as const;

const ROLE_FOR_TYPE: Record<ReferenceMedia['type'], readonly ReferenceMedia['role'][]> = {
  image_url: ['reference_image', 'first_frame', 'last_frame'],
  video_url: ['reference_video'],
  audio_url: ['reference_audio'],
};

export interface SubmissionInput {
  model: string;
  prompt: string;
  seconds?: string;
  metadata?: {
    ratio?: string;
    resolution?: string;
    generate_audio?: boolean;
    callback_url?: string;
    content?: Array<{ type: ReferenceMedia['type']; role: string } & Partial<Record<ReferenceMedia['type'], { url: string }>>>;
  };
}

export interface ValidatedSubmission {
  seconds: number;
  resolution: string;
  ratio: string;
  request: VideoGenerationRequest;
}

function refuse(param: string, message: string): never {
  throw new GatewayError('invalid_request', message, param);
}

function listOf(values: readonly (string | number)[]): string {
  return values.join(', ');
}

function validateContent(model: VideoModel, content: NonNullable<SubmissionInput['metadata']>['content'] = []): ReferenceMedia[] {
  const media: ReferenceMedia[] = content.map((entry, index) => {
    const allowed = ROLE_FOR_TYPE[entry.type];
    if (!allowed.includes(entry.role as ReferenceMedia['role'])) {
      refuse(`metadata.content.${index}.role`, `metadata.content[${index}].role must be ${allowed.join(' or ')} for ${withArticle(entry.type)} entry, got '${entry.role}'.`);
    }
    return { type: entry.type, url: entry[entry.type]!.url, role: entry.role as ReferenceMedia['role'] };
  });

  const count = (role: ReferenceMedia['role']) => media.filter((item) => item.role === role).length;
  const images = count('reference_image');
  const videos = count('reference_video');
  const audios = count('reference_audio');
  const firstFrames = count('first_frame');
  const lastFrames = count('last_frame');
  const frames = firstFrames + lastFrames;

  if (frames > 0 && images > 0) {
    refuse('metadata.content', 'Reference images (role reference_image) cannot be mixed with first/last-frame images (first_frame, last_frame); use one mode.');
  }
  if (frames > 0 && !model.reference.frames) refuse('metadata.content', `The model '${model.id}' does not support first/last-frame images.`);
  if (firstFrames > 1 || lastFrames > 1) refuse('metadata.content', 'At most one first_frame and one last_frame image are allowed.');
  if (lastFrames > 0 && firstFrames === 0) refuse('metadata.content', 'A last_frame image needs a first_frame image too.');

  const caps: Array<[number, number, number, string, string]> = [
    [images, SPEC_REFERENCE_CAPS.images, model.reference.images, 'reference images (image_url)', 'images'],
    [videos, SPEC_REFERENCE_CAPS.videos, model.reference.videos, 'reference videos (video_url)', 'videos'],
    [audios, SPEC_REFERENCE_CAPS.audios, model.reference.audios, 'reference audios (audio_url)', 'audios'],
  ];
  for (const [found, specCap, modelCap, label] of caps) {
    const cap = Math.min(specCap, modelCap);
    if (found > cap) {
      refuse('metadata.content', cap === 0 ? `The model '${model.id}' does not accept ${label}.` : `At most ${cap} ${label} are allowed for '${model.id}', got ${found}.`);
    }
  }
  if (media.length > model.reference.total) {
    refuse('metadata.content', `At most ${model.reference.total} reference entries in total are allowed for '${model.id}', got ${media.length}.`);
  }
  return media;
}

/** "@image2", in any case, standing as a word of its own: not inside an address
 * (bob@image1.com) and not the start of a longer word (@image1x, @image1é: letters and digits
 * of any script count as word characters, and so do combining marks, which is how an accent
 * typed as its own character, "jose\u0301@image1.com", attaches to the letter before it). */
const CITATION = /(?<![\p{L}\p{M}\p{N}_])@image(\p{Nd}+)(?![\p{L}\p{M}\p{N}_])/giu;

/** Spec 4.1 rule 2: @image1 to @imageN cite the reference images (role reference_image), in the
 * order of their entries; first/last-frame images are not references and cannot be cited. */
function validateCitations(prompt: string, referenceImages: number): void {
  for (const match of prompt.matchAll(CITATION)) {
    // The vendor reads the prompt as written: @image01, or digits of another script, might not
    // be the image the gateway took it for.
    if (!/^[1-9][0-9]*$/.test(match[1]!)) {
      refuse('prompt', `The prompt cites ${match[0]}: write a citation as @image1 to @imageN, in ASCII digits without a leading zero.`);
    }
    const cited = Number(match[1]);
    if (cited < 1 || cited > referenceImages) {
      const available = referenceImages === 0 ? 'the request has no reference images (role reference_image)' : `valid citations are @image1 to @image${referenceImages}`;
      refuse('prompt', `The prompt cites ${match[0]}, but ${available} in metadata.content.`);
    }
  }
}

/** A setting Seedance reads from the prompt's own text ("a fox --duration 12 --rs 1080p"), as
 * clients of its older API sent them, and which can prevail over the body's. One that changes
 * the clip's length, size or shape would have the vendor make a clip other than the one priced
 * and recorded; watermark, seed and camerafixed change neither and pass as text. */
// How Seedance splits the text is not documented: a refusal costs the caller a rewrite, a miss
// a clip other than the one priced, so anything but a letter, digit or underscore may stand
// before the flag (`(--dur 12)`, `,--dur`, a zero-width space) and anything but those or a
// hyphen after it (`--dur=12`).
const SEEDANCE_PROMPT_SETTING = /(?<![\p{L}\p{N}_])--(?:resolution|rs|ratio|rt|duration|dur|frames|framespersecond|framepersecond|fps)(?![\p{L}\p{N}_-])/iu;

/** The upstream's `protocol` decides the vendor's own rules on the prompt. */
export function validateVideoSubmission(model: VideoModel, input: SubmissionInput, protocol: Upstream['protocol']): ValidatedSubmission {
  if (protocol === 'seedance') {
    const setting = SEEDANCE_PROMPT_SETTING.exec(input.prompt);
    if (setting) {
      refuse('prompt', `The prompt holds '${setting[0]}', which Seedance reads as a setting of the clip, over the one priced: give the length as seconds and the size as metadata.resolution and metadata.ratio.`);
    }
  }
  const metadata = input.metadata ?? {};
  const seconds = input.seconds === undefined ? model.default_seconds : Number(input.seconds);
  if (!model.seconds.includes(seconds)) {
    refuse('seconds', `seconds must be one of ${listOf(model.seconds)} for '${model.id}', got "${input.seconds}".`);
  }
  const resolution = metadata.resolution ?? model.default_resolution;
  if (!(model.resolutions as string[]).includes(resolution)) {
    refuse('metadata.resolution', `metadata.resolution must be one of ${listOf(model.resolutions)} for '${model.id}', got '${resolution}'.`);
  }
  const ratio = metadata.ratio ?? model.default_ratio;
  if (!model.ratios.includes(ratio)) {
    refuse('metadata.ratio', `metadata.ratio must be one of ${listOf(model.ratios)} for '${model.id}', got '${ratio}'.`);
  }
  if (metadata.generate_audio === true && !model.audio) {
    refuse('metadata.generate_audio', `The model '${model.id}' cannot generate audio; omit metadata.generate_audio or set it to false.`);
  }
  const content = validateContent(model, metadata.content);
  validateCitations(input.prompt, content.filter((item) => item.role === 'reference_image').length);

  const request: VideoGenerationRequest = { upstreamModel: model.upstream_model, prompt: input.prompt, seconds, ratio, resolution, content };
  // Only to a model that makes audio: for one that does not, `false` is all it can be and its
  // own default, and older Seedance models refuse the field itself (seedance-wire.ts).
  if (metadata.generate_audio !== undefined && model.audio) request.generateAudio = metadata.generate_audio;
  return { seconds, resolution, ratio, request };
}
