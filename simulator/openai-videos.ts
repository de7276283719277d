import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseMarkers } from './markers.ts';
import { sampleClip, sendMediaBytes } from './media.ts';
import { acceptMultipartForms } from './multipart.ts';
import { sendOpenAiError } from './openai-errors.ts';
import type { SimulatorStats } from './stats.ts';
import { CreatedUnderKey, idempotencyKeyOf, loseTheAnswer, type SubmissionGate } from './submission-gate.ts';
import { firstProblem } from './validation.ts';
import { phaseAt, taskTiming, type Clock, type VideoPhase, type VideoTask, type VideoTaskStore } from './video-tasks.ts';

// OpenAI's video API (Sora): a video object that moves queued → in_progress → completed or
// failed, whose clip is downloaded through the authenticated /content endpoint (there is no
// public URL). Registered inside the /v1 scope that applies OpenAI's auth and error shape.

export interface OpenAiVideoDetails {
  seconds: string;
  size: string;
}

export interface OpenAiVideoOptions {
  videos: VideoTaskStore<OpenAiVideoDetails>;
  gate: SubmissionGate;
  stats: SimulatorStats;
  clock: Clock;
}

// Strict like the real endpoint: every field is a string (multipart sends nothing else) and
// an unknown parameter is refused, so a gateway sending `duration` instead of `seconds` fails.
const createVideoBody = z.strictObject({
  model: z.string().min(1).default('sora-2'),
  prompt: z.string().min(1),
  seconds: z.enum(['4', '8', '12']).default('4'),
  size: z.enum(['720x1280', '1280x720', '1024x1792', '1792x1024']).default('720x1280'),
  input_reference: z.unknown().optional(),
});

const statusNames = { queued: 'queued', running: 'in_progress', succeeded: 'completed', failed: 'failed', cancelled: 'failed' } as const;
// Vendor download links last a day; the simulator reports the same horizon.
const expirySeconds = 24 * 60 * 60;
const unixSeconds = (milliseconds: number) => Math.floor(milliseconds / 1000);

function videoObject(video: VideoTask<OpenAiVideoDetails>, phase: VideoPhase) {
  const finished = phase.state === 'succeeded' || phase.state === 'failed';
  const completedAt = finished ? unixSeconds(phase.sinceMs) : null;
  return {
    id: video.id,
    object: 'video',
    model: video.model,
    status: statusNames[phase.state],
    progress: phase.progress,
    created_at: unixSeconds(video.createdAtMs),
    completed_at: completedAt,
    expires_at: phase.state === 'succeeded' && completedAt !== null ? completedAt + expirySeconds : null,
    prompt: video.prompt,
    seconds: video.details.seconds,
    size: video.details.size,
    remixed_from_video_id: null,
    error: phase.state === 'failed' ? { code: 'moderation_blocked', message: 'The video was blocked by the moderation system ([sim:fail] in the prompt).' } : null,
  };
}

export async function openAiVideoRoutes(app: FastifyInstance, options: OpenAiVideoOptions): Promise<void> {
  const { videos, gate, stats, clock } = options;
  const createdUnderKey = new CreatedUnderKey();
  acceptMultipartForms(app);

  app.post('/videos', async (request, reply) => {
    const earlier = videos.find(createdUnderKey.taskIdFor(idempotencyKeyOf(request.headers)) ?? '');
    if (earlier) return videoObject(earlier, phaseAt(earlier, clock()));
    const parsed = createVideoBody.safeParse(request.body ?? {});
    if (!parsed.success) {
      stats.videoSubmissionsRejected++;
      const problem = firstProblem(parsed.error);
      return sendOpenAiError(reply, 400, problem.message, { param: problem.param });
    }
    const body = parsed.data;
    const markers = parseMarkers(body.prompt);
    const verdict = gate.judge(body.prompt, markers);
    if (verdict.kind !== 'accept') stats.videoSubmissionsRejected++;
    if (verdict.kind === 'reject') return sendOpenAiError(reply, 400, verdict.message, { param: 'prompt', code: 'moderation_blocked' });
    if (verdict.kind === 'unavailable') return sendOpenAiError(reply, 503, verdict.message);

    const video: VideoTask<OpenAiVideoDetails> = {
      id: `video_${randomBytes(24).toString('hex')}`,
      model: body.model,
      prompt: body.prompt,
      createdAtMs: clock(),
      ...taskTiming(markers),
      willFail: markers.fail,
      details: { seconds: body.seconds, size: body.size },
    };
    videos.add(video);
    stats.videoTasks++;
    createdUnderKey.remember(idempotencyKeyOf(request.headers), video.id);
    if (gate.losesAnswer(body.prompt, markers)) return loseTheAnswer(request, reply);
    // The creation answer is always the queued snapshot, as OpenAI's is, even for instant tasks.
    return videoObject(video, { state: 'queued', progress: 0, sinceMs: video.createdAtMs });
  });

  app.get<{ Params: { id: string } }>('/videos/:id', async (request, reply) => {
    const video = videos.find(request.params.id);
    if (!video) return sendOpenAiError(reply, 404, `Video with id '${request.params.id}' not found.`, { param: 'video_id' });
    return videoObject(video, phaseAt(video, clock()));
  });

  app.get<{ Params: { id: string }; Querystring: { variant?: string } }>('/videos/:id/content', async (request, reply) => {
    const video = videos.find(request.params.id);
    if (!video) return sendOpenAiError(reply, 404, `Video with id '${request.params.id}' not found.`, { param: 'video_id' });
    const variant = request.query.variant ?? 'video';
    if (variant !== 'video') return sendOpenAiError(reply, 400, `The simulator only serves variant 'video', not '${variant}'.`, { param: 'variant' });
    const phase = phaseAt(video, clock());
    if (phase.state !== 'succeeded') {
      return sendOpenAiError(reply, 404, `Video '${video.id}' has no content: its status is ${statusNames[phase.state]}.`, { param: 'video_id' });
    }
    return sendMediaBytes(request, reply, sampleClip, 'video/mp4');
  });

  // Deleting also stops a video still being generated: it simply stops existing.
  app.delete<{ Params: { id: string } }>('/videos/:id', async (request, reply) => {
    if (!videos.delete(request.params.id)) {
      return sendOpenAiError(reply, 404, `Video with id '${request.params.id}' not found.`, { param: 'video_id' });
    }
    return { id: request.params.id, object: 'video.deleted', deleted: true };
  });
}
