import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { videoSubmissionBodyFor } from '../../api/routes/video/submission-schema.ts';
import { loadCatalog, type VideoModel } from '../../core/catalog.ts';
import { GatewayError } from '../../core/errors.ts';
import { SPEC_REFERENCE_CAPS, validateVideoSubmission, type SubmissionInput } from '../../core/video-validation.ts';

// Properties of video submissions, per catalog model: every request built within the model's
// rules passes both layers (the route's zod schema and core/video-validation.ts), and each
// single mutation out of them is refused with a 400 that names the field at fault.

const SEED = 424_242;
const catalog = loadCatalog('config/catalog.local.json', { SIMULATOR_URL: 'http://127.0.0.1:1' });
const models = catalog.all().filter((model): model is VideoModel => model.kind === 'video');
const routeSchema = videoSubmissionBodyFor(catalog);
const protocolOf = (model: VideoModel) => catalog.upstream(model.upstream).protocol;

type Entry = NonNullable<NonNullable<SubmissionInput['metadata']>['content']>[number];
const entry = (type: 'image_url' | 'video_url' | 'audio_url', role: string, index: number): Entry =>
  ({ type, role, [type]: { url: `https://media.example/${type}/${index}` } }) as Entry;

const caps = (model: VideoModel) => ({
  images: Math.min(SPEC_REFERENCE_CAPS.images, model.reference.images),
  videos: Math.min(SPEC_REFERENCE_CAPS.videos, model.reference.videos),
  audios: Math.min(SPEC_REFERENCE_CAPS.audios, model.reference.audios),
});

/** Reference entries the model accepts: reference mode, or first/last-frame mode. */
function validContent(model: VideoModel): fc.Arbitrary<Entry[]> {
  const cap = caps(model);
  const counts = fc.record({
    images: fc.nat({ max: cap.images }),
    videos: fc.nat({ max: cap.videos }),
    audios: fc.nat({ max: cap.audios }),
    frames: model.reference.frames ? fc.constantFrom(0, 1, 2) : fc.constant(0),
  });
  return counts
    .filter(({ images, videos, audios, frames }) => images + videos + audios + frames <= model.reference.total)
    .map(({ images, videos, audios, frames }) => [
      ...(frames > 0 ? [entry('image_url', 'first_frame', 0)] : Array.from({ length: images }, (_, index) => entry('image_url', 'reference_image', index))),
      ...(frames > 1 ? [entry('image_url', 'last_frame', 1)] : []),
      ...Array.from({ length: videos }, (_, index) => entry('video_url', 'reference_video', index)),
      ...Array.from({ length: audios }, (_, index) => entry('audio_url', 'reference_audio', index)),
    ])
    .chain((content) => fc.shuffledSubarray(content, { minLength: content.length, maxLength: content.length }));
}

const words = fc.array(fc.constantFrom('a', 'fox', 'runs', 'through', 'snow', 'at', 'dawn', 'golden', 'light'), { minLength: 1, maxLength: 12 });

function validSubmission(model: VideoModel): fc.Arbitrary<SubmissionInput> {
  return fc
    .record({
      seconds: fc.option(fc.constantFrom(...model.seconds.map(String)), { nil: undefined }),
      resolution: fc.option(fc.constantFrom(...model.resolutions), { nil: undefined }),
      ratio: fc.option(fc.constantFrom(...model.ratios), { nil: undefined }),
      audio: model.audio ? fc.option(fc.boolean(), { nil: undefined }) : fc.option(fc.constant(false), { nil: undefined }),
      callback: fc.option(fc.constant('https://hooks.example.com/framegate'), { nil: undefined }),
      content: fc.option(validContent(model), { nil: undefined }),
      words,
    })
    .chain((parts) => {
      // Only reference images are cited (spec 4.1 rule 2), first/last-frame images are not.
      const images = (parts.content ?? []).filter((item) => item.role === 'reference_image').length;
      const citations = images > 0 ? fc.array(fc.integer({ min: 1, max: images }), { maxLength: 3 }) : fc.constant([] as number[]);
      return citations.map((cited) => {
        const metadata: NonNullable<SubmissionInput['metadata']> = {};
        if (parts.resolution !== undefined) metadata.resolution = parts.resolution;
        if (parts.ratio !== undefined) metadata.ratio = parts.ratio;
        if (parts.audio !== undefined) metadata.generate_audio = parts.audio;
        if (parts.callback !== undefined) metadata.callback_url = parts.callback;
        if (parts.content !== undefined) metadata.content = parts.content;
        const submission: SubmissionInput = { model: model.id, prompt: [...parts.words, ...cited.map((index) => `@image${index}`)].join(' ') };
        if (parts.seconds !== undefined) submission.seconds = parts.seconds;
        if (Object.keys(metadata).length > 0) submission.metadata = metadata;
        return submission;
      });
    });
}

/** A submission of any model, with its model. */
const anySubmission = fc.constantFrom(...models).chain((model) => validSubmission(model).map((submission) => ({ model, submission })));

function refusal(run: () => unknown): GatewayError {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof GatewayError, String(error));
    return error;
  }
  assert.fail('the submission was accepted');
}

/** A mutation: what it changes, and the field a 400 must name. */
interface Mutation {
  applies(model: VideoModel): boolean;
  mutate(model: VideoModel, submission: SubmissionInput): fc.Arbitrary<SubmissionInput>;
  param: (submission: SubmissionInput) => string;
  /** The route's zod schema refuses it first, naming the same field. */
  inRouteSchema?: boolean;
}

const withMetadata = (submission: SubmissionInput, metadata: NonNullable<SubmissionInput['metadata']>): SubmissionInput => ({
  ...submission,
  metadata: { ...submission.metadata, ...metadata },
});

const mutations: Record<string, Mutation> = {
  'seconds the model does not offer': {
    applies: () => true,
    mutate: (model, submission) =>
      fc.integer({ min: 0, max: 9999 }).filter((seconds) => !model.seconds.includes(seconds)).map((seconds) => ({ ...submission, seconds: String(seconds) })),
    param: () => 'seconds',
    inRouteSchema: true,
  },
  'a resolution the model lacks': {
    applies: () => true,
    mutate: (model, submission) =>
      fc.constantFrom('240p', '480p', '720p', '1080p', '4k').filter((value) => !(model.resolutions as string[]).includes(value)).map((resolution) => withMetadata(submission, { resolution })),
    param: () => 'metadata.resolution',
    inRouteSchema: true,
  },
  'a ratio the model lacks': {
    applies: () => true,
    mutate: (model, submission) => fc.constantFrom('2:1', '5:4', '1:1', '4:3', '21:9').filter((value) => !model.ratios.includes(value)).map((ratio) => withMetadata(submission, { ratio })),
    param: () => 'metadata.ratio',
    inRouteSchema: true,
  },
  'audio on a model without audio': {
    applies: (model) => !model.audio,
    mutate: (_model, submission) => fc.constant(withMetadata(submission, { generate_audio: true })),
    param: () => 'metadata.generate_audio',
    inRouteSchema: true,
  },
  'an entry whose role belongs to another type': {
    applies: (model) => model.reference.total > 0,
    mutate: (_model, submission) =>
      fc.constantFrom<[Entry['type'], string]>(['image_url', 'reference_video'], ['video_url', 'reference_image'], ['audio_url', 'first_frame']).map(([type, role]) => {
        const content = [...(submission.metadata?.content ?? []), entry(type, role, 99)];
        return withMetadata(submission, { content });
      }),
    param: (submission) => `metadata.content.${(submission.metadata?.content?.length ?? 1) - 1}.role`,
  },
  'one entry more than a per-kind cap': {
    applies: (model) => Object.values(caps(model)).some((cap) => cap > 0),
    mutate: (model, submission) =>
      fc
        .constantFrom(
          ...(
            [
              ['image_url', 'reference_image', caps(model).images],
              ['video_url', 'reference_video', caps(model).videos],
              ['audio_url', 'reference_audio', caps(model).audios],
            ] as const
          ).filter(([, , cap]) => cap > 0),
        )
        .map(([type, role, cap]) => withMetadata(submission, { content: Array.from({ length: cap + 1 }, (_, index) => entry(type, role, index)) })),
    param: () => 'metadata.content',
  },
  'reference images mixed with a first frame': {
    applies: (model) => model.reference.frames && caps(model).images > 0,
    mutate: (_model, submission) => fc.constant(withMetadata(submission, { content: [entry('image_url', 'reference_image', 0), entry('image_url', 'first_frame', 1)] })),
    param: () => 'metadata.content',
  },
  'a last frame without a first frame': {
    applies: (model) => model.reference.frames,
    mutate: (_model, submission) => fc.constant(withMetadata(submission, { content: [entry('image_url', 'last_frame', 0)] })),
    param: () => 'metadata.content',
  },
  'two first frames': {
    applies: (model) => model.reference.frames && model.reference.total >= 2,
    mutate: (_model, submission) => fc.constant(withMetadata(submission, { content: [entry('image_url', 'first_frame', 0), entry('image_url', 'first_frame', 1)] })),
    param: () => 'metadata.content',
  },
  'a citation past the last image': {
    applies: () => true,
    mutate: (_model, submission) => {
      const images = (submission.metadata?.content ?? []).filter((item) => item.role === 'reference_image').length;
      return fc.integer({ min: images + 1, max: images + 20 }).map((index) => ({ ...submission, prompt: `${submission.prompt} like @image${index}` }));
    },
    param: () => 'prompt',
  },
};

describe('video submission properties', () => {
  it('accepts every submission built within a model’s rules, in the route schema and in core', () => {
    fc.assert(
      fc.property(anySubmission, ({ model, submission }) => {
        const parsed = routeSchema.safeParse(submission);
        assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
        const validated = validateVideoSubmission(model, submission, protocolOf(model));
        assert.equal(validated.seconds, submission.seconds === undefined ? model.default_seconds : Number(submission.seconds));
        assert.equal(validated.resolution, submission.metadata?.resolution ?? model.default_resolution);
        assert.equal(validated.request.content.length, submission.metadata?.content?.length ?? 0);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  for (const [name, mutation] of Object.entries(mutations)) {
    it(`refuses ${name}, naming the field`, () => {
      const candidates = models.filter((model) => mutation.applies(model));
      assert.ok(candidates.length > 0, 'some catalog model can carry this mutation');
      const mutated = fc
        .constantFrom(...candidates)
        .chain((model) => validSubmission(model).chain((submission) => mutation.mutate(model, submission).map((bad) => ({ model, bad }))));
      fc.assert(
        fc.property(mutated, ({ model, bad }) => {
          const error = refusal(() => validateVideoSubmission(model, bad, protocolOf(model)));
          assert.equal(error.status, 400);
          assert.equal(error.param, mutation.param(bad), error.message);
          if (mutation.inRouteSchema) {
            const parsed = routeSchema.safeParse(bad);
            assert.equal(parsed.success, false);
            assert.equal(parsed.error!.issues[0]!.path.join('.'), mutation.param(bad));
          }
        }),
        { seed: SEED, numRuns: 100 },
      );
    });
  }
});

describe('@imageN citations', () => {
  const seedance = models.find((model) => model.id === 'seedance-2.0')!;
  const oneImage = { content: [entry('image_url', 'reference_image', 0)] };
  // Without reference images any citation is refused: these cite nothing.
  for (const prompt of ['mail bob@image1.com', 'see @image1x and @images', 'no @image here', 'un café @image1é', 'x@image1 y', 'ß@image1', 'mail jose\u0301@image1.com', 'see @image1\u0301 here']) {
    it(`reads ${JSON.stringify(prompt)} as citing nothing`, () => {
      assert.doesNotThrow(() => validateVideoSubmission(seedance, { model: seedance.id, prompt }, 'seedance'));
    });
  }
  it('reads a citation in any case, after punctuation', () => {
    assert.doesNotThrow(() => validateVideoSubmission(seedance, { model: seedance.id, prompt: '@image1, then (@IMAGE1).', metadata: oneImage }, 'seedance'));
    assert.throws(() => validateVideoSubmission(seedance, { model: seedance.id, prompt: '(@IMAGE2) runs', metadata: oneImage }, 'seedance'), (error: GatewayError) => error.param === 'prompt' && /@IMAGE2/.test(error.message));
    assert.doesNotThrow(() => validateVideoSubmission(seedance, { model: seedance.id, prompt: 'le renard @image1 à l’aube', metadata: oneImage }, 'seedance'));
  });
  it('refuses a citation the vendor might read as another image: a leading zero, or digits of another script', () => {
    for (const cited of ['@image01', '@image0', '@image١']) {
      assert.throws(
        () => validateVideoSubmission(seedance, { model: seedance.id, prompt: `a fox ${cited} at dawn`, metadata: oneImage }, 'seedance'),
        (error: GatewayError) => error.status === 400 && error.param === 'prompt' && error.message.includes(cited) && /without a leading zero/.test(error.message),
        cited,
      );
    }
  });
});

describe('generate_audio on the way to the vendor', () => {
  it('is passed to a model that makes audio, and left out for one that does not', () => {
    const withAudio = models.find((model) => model.audio)!;
    const silent = models.find((model) => !model.audio)!;
    for (const value of [true, false]) {
      const request = validateVideoSubmission(withAudio, { model: withAudio.id, prompt: 'a fox', metadata: { generate_audio: value } }, protocolOf(withAudio)).request;
      assert.equal(request.generateAudio, value, withAudio.id);
    }
    // false is a silent model's only value and its default: older Seedance models refuse the field.
    const request = validateVideoSubmission(silent, { model: silent.id, prompt: 'a fox', metadata: { generate_audio: false } }, protocolOf(silent)).request;
    assert.equal('generateAudio' in request, false, silent.id);
  });
});

describe('settings written into a Seedance prompt', () => {
  const seedance = models.find((model) => model.id === 'seedance-2.0')!;
  const sora = models.find((model) => catalog.upstream(model.upstream).protocol === 'openai-videos')!;
  it('refuses one that would make a clip other than the one priced, naming it', () => {
    for (const [prompt, setting] of [['a fox --dur 12', '--dur'], ['a fox --resolution 1080p at dawn', '--resolution'], ['--rs 1080p a fox', '--rs'], ['a fox\n--RATIO 21:9', '--RATIO'], ['a fox --fps 60', '--fps'], ['a fox --frames 241', '--frames'], ['a fox\t--rt 9:16', '--rt'], ['a fox (--dur 12)', '--dur'], ['a fox,--dur 12', '--dur'], ['a fox --dur=12', '--dur'], ['a fox \u200b--dur 12', '--dur']] as const) {
      assert.throws(
        () => validateVideoSubmission(seedance, { model: seedance.id, prompt }, 'seedance'),
        (error: GatewayError) => error.status === 400 && error.param === 'prompt' && error.message.includes(`'${setting}'`) && /seconds/.test(error.message),
        prompt,
      );
    }
  });
  it('passes the same words where they are not a setting, and to a vendor that does not read settings from the prompt', () => {
    for (const prompt of ['a fox --watermark false --seed 7 --cf true', 'a fox--dur 12', 'a fox --durable coat', 'a fox — dur 12', 'the --resolution-free look']) {
      assert.doesNotThrow(() => validateVideoSubmission(seedance, { model: seedance.id, prompt }, 'seedance'), prompt);
    }
    assert.doesNotThrow(() => validateVideoSubmission(sora, { model: sora.id, prompt: 'a fox --dur 12 --rs 1080p' }, 'openai-videos'));
  });
});
