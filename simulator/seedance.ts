import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { publicBaseUrl } from './base-url.ts';
import { hasBearerToken } from './bearer.ts';
import { parseMarkers } from './markers.ts';
import { parseCreateTask } from './seedance-request.ts';
import type { SimulatorStats } from './stats.ts';
import { CreatedUnderKey, idempotencyKeyOf, loseTheAnswer, type SubmissionGate } from './submission-gate.ts';
import { phaseAt, taskTiming, type Clock, type VideoPhase, type VideoTask, type VideoTaskStore } from './video-tasks.ts';

// Seedance as served by BytePlus ModelArk / Volcengine Ark: create, query and cancel
// generation tasks under /api/v3, errors as `{error: {code, message, param?, type}}`.

export interface SeedanceDetails {
  ratio: string;
  resolution: string;
  duration: number;
  seed: number;
  generateAudio?: boolean;
}

export interface SeedanceOptions {
  tasks: VideoTaskStore<SeedanceDetails>;
  gate: SubmissionGate;
  stats: SimulatorStats;
  clock: Clock;
  baseUrl?: string;
}

const framesPerSecond = 24;
const defaultDurationSeconds = 5;
const shortSidePixels: Record<string, number> = { '480p': 480, '720p': 720, '1080p': 1080 };

const errorTypes: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  404: 'NotFound',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
};

function sendArkError(reply: FastifyReply, status: number, code: string, message: string, param?: string | null): FastifyReply {
  const type = errorTypes[status] ?? (status >= 500 ? 'InternalServiceError' : 'BadRequest');
  return reply.code(status).send({ error: { code, message, ...(param ? { param } : {}), type } });
}

// Ark ids read like cgt-20250331175019-68d9t: creation time, then a short random suffix.
function newTaskId(nowMs: number): string {
  const stamp = new Date(nowMs).toISOString().replace(/\D/g, '').slice(0, 14);
  return `cgt-${stamp}-${randomBytes(3).toString('hex').slice(0, 5)}`;
}

// Ark bills output tokens as width × height × fps × seconds / 1024; the simulator applies the
// same formula to the nominal frame size so the gateway's usage handling sees real magnitudes.
function completionTokens(details: SeedanceDetails): number {
  const shortSide = shortSidePixels[details.resolution] ?? 720;
  const [across = 16, down = 9] = /^\d+:\d+$/.test(details.ratio) ? details.ratio.split(':').map(Number) : [16, 9];
  const longSide = Math.round((shortSide * Math.max(across, down)) / Math.min(across, down));
  return Math.floor((shortSide * longSide * framesPerSecond * details.duration) / 1024);
}

const unixSeconds = (milliseconds: number) => Math.floor(milliseconds / 1000);

function taskView(task: VideoTask<SeedanceDetails>, phase: VideoPhase, baseUrl: string) {
  const { details } = task;
  const tokens = completionTokens(details);
  return {
    id: task.id,
    model: task.model,
    status: phase.state,
    ...(phase.state === 'succeeded' ? { content: { video_url: `${baseUrl}/media/${task.id}.mp4` } } : {}),
    error:
      phase.state === 'failed'
        ? { code: 'OutputVideoSensitiveContentDetected', message: 'The generated video may contain sensitive content ([sim:fail] in the prompt).' }
        : null,
    ...(phase.state === 'succeeded' ? { usage: { completion_tokens: tokens, total_tokens: tokens } } : {}),
    created_at: unixSeconds(task.createdAtMs),
    updated_at: unixSeconds(phase.sinceMs),
    seed: details.seed,
    resolution: details.resolution,
    ratio: details.ratio,
    duration: details.duration,
    framespersecond: framesPerSecond,
    ...(details.generateAudio === undefined ? {} : { generate_audio: details.generateAudio }),
  };
}

export async function seedanceRoutes(app: FastifyInstance, options: SeedanceOptions): Promise<void> {
  const { tasks, gate, stats, clock } = options;
  const createdUnderKey = new CreatedUnderKey();

  app.addHook('onRequest', async (request, reply) => {
    if (!hasBearerToken(request)) {
      return sendArkError(reply, 401, 'AuthenticationError', 'The API key in the request is missing or invalid.');
    }
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'simulator route failed');
    return sendArkError(reply, status, status >= 500 ? 'InternalServiceError' : 'InvalidParameter', status >= 500 ? 'The service encountered an unexpected internal error.' : error.message);
  });
  app.setNotFoundHandler((request, reply) => sendArkError(reply, 404, 'NotFound', `The requested path ${request.url} does not exist.`));

  app.post('/contents/generations/tasks', async (request, reply) => {
    const idempotencyKey = idempotencyKeyOf(request.headers);
    const earlier = createdUnderKey.taskIdFor(idempotencyKey);
    if (earlier !== undefined) return { id: earlier };
    const parsed = parseCreateTask(request.body);
    if (!parsed.ok) {
      stats.videoSubmissionsRejected++;
      const { param, reason } = parsed.problem;
      return sendArkError(reply, 400, 'InvalidParameter', `The parameter \`${param ?? 'body'}\` specified in the request is not valid: ${reason}`, param);
    }
    const markers = parseMarkers(parsed.prompt);
    const verdict = gate.judge(parsed.prompt, markers);
    if (verdict.kind !== 'accept') stats.videoSubmissionsRejected++;
    if (verdict.kind === 'reject') return sendArkError(reply, 400, 'InvalidParameter', verdict.message, 'content');
    if (verdict.kind === 'unavailable') {
      reply.header('retry-after', String(verdict.retryAfterSeconds));
      return sendArkError(reply, 503, 'ServiceUnavailable', verdict.message);
    }

    const { body } = parsed;
    const nowMs = clock();
    const task: VideoTask<SeedanceDetails> = {
      id: newTaskId(nowMs),
      model: body.model,
      prompt: parsed.prompt,
      createdAtMs: nowMs,
      ...taskTiming(markers),
      willFail: markers.fail,
      details: {
        ratio: body.ratio ?? '16:9',
        resolution: body.resolution ?? '720p',
        duration: body.duration === undefined || body.duration === -1 ? defaultDurationSeconds : body.duration,
        seed: body.seed === undefined || body.seed === -1 ? randomInt(0, 2 ** 31) : body.seed,
        generateAudio: body.generate_audio,
      },
    };
    tasks.add(task);
    stats.videoTasks++;
    createdUnderKey.remember(idempotencyKey, task.id);
    if (gate.losesAnswer(parsed.prompt, markers)) return loseTheAnswer(request, reply);
    return { id: task.id };
  });

  app.get<{ Params: { id: string } }>('/contents/generations/tasks/:id', async (request, reply) => {
    const task = tasks.find(request.params.id);
    if (!task) return sendArkError(reply, 404, 'ResourceNotFound', `The specified task ${request.params.id} is not found.`);
    return taskView(task, phaseAt(task, clock()), publicBaseUrl(request, options.baseUrl));
  });

  // Ark cancels a task still waiting or working; a finished task's record is deleted instead.
  app.delete<{ Params: { id: string } }>('/contents/generations/tasks/:id', async (request, reply) => {
    const task = tasks.find(request.params.id);
    if (!task) return sendArkError(reply, 404, 'ResourceNotFound', `The specified task ${request.params.id} is not found.`);
    const nowMs = clock();
    const state = phaseAt(task, nowMs).state;
    if (state === 'queued' || state === 'running') tasks.cancel(task, nowMs);
    else if (state !== 'cancelled') tasks.delete(task.id);
    return {};
  });
}
