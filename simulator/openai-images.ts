import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { publicBaseUrl } from './base-url.ts';
import type { ImageStore } from './image-store.ts';
import type { SimulatorStats } from './stats.ts';
import { parseMarkers } from './markers.ts';
import { sendOpenAiError } from './openai-errors.ts';
import { encodePng, type Rgb } from './png.ts';
import { countTokens } from './tokens.ts';
import { firstProblem } from './validation.ts';
import type { Clock } from './video-tasks.ts';

// OpenAI's image generation. The images are real PNGs, but honest about their size: at most
// 64 pixels on the long side whatever `size` asks for (1024x1024 gives 64x64, 1792x1024 gives
// 64x37), keeping the aspect ratio. Each is a diagonal gradient between two colours hashed
// from the prompt and the image's index, so a prompt always yields the same pictures.

export interface ImageOptions {
  images: ImageStore;
  stats: SimulatorStats;
  clock: Clock;
  baseUrl?: string;
}

const longestSide = 64;
// gpt-image-1 bills a square low-quality image as 272 output tokens; used as a nominal figure.
const outputTokensPerImage = 272;

// Like OpenAI, an explicit null means "the default" for the optional parameters.
const generateBody = z.object({
  prompt: z.string().min(1),
  model: z.string().min(1).default('gpt-image-1'),
  n: z.number().int().min(1).max(10).nullish().transform((value) => value ?? 1),
  size: z
    .string()
    .regex(/^(auto|\d{1,5}x\d{1,5})$/, 'must be WIDTHxHEIGHT (e.g. 1024x1024) or auto')
    .nullish()
    .transform((value) => value ?? '1024x1024'),
  response_format: z.enum(['url', 'b64_json']).nullish(),
});

/** As OpenAI answers: gpt-image models always with base64 (they take no `response_format`;
 * the simulator still honours one), dall-e models with a link unless asked otherwise. */
function answerFormat(model: string, asked: 'url' | 'b64_json' | null | undefined): 'url' | 'b64_json' {
  return asked ?? (model.startsWith('gpt-image') ? 'b64_json' : 'url');
}

function pixelSize(size: string): { width: number; height: number } {
  const [width = 1024, height = 1024] = size === 'auto' ? [] : size.split('x').map(Number);
  const scale = Math.min(1, longestSide / Math.max(width, height, 1));
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

export function promptImage(prompt: string, index: number, size: string, paddingBytes = 0): Buffer {
  const digest = createHash('sha256').update(`${index}:${prompt}`).digest();
  const from: Rgb = [digest[0]!, digest[1]!, digest[2]!];
  const to: Rgb = [digest[3]!, digest[4]!, digest[5]!];
  const { width, height } = pixelSize(size);
  const span = Math.max(1, width + height - 2);
  return encodePng(width, height, (x, y) => {
    const share = (x + y) / span;
    const mix = (channel: 0 | 1 | 2) => Math.round(from[channel] + (to[channel] - from[channel]) * share);
    return [mix(0), mix(1), mix(2)];
  }, paddingBytes);
}

export async function imageRoutes(app: FastifyInstance, options: ImageOptions): Promise<void> {
  app.post('/images/generations', async (request, reply) => {
    const parsed = generateBody.safeParse(request.body);
    if (!parsed.success) {
      const problem = firstProblem(parsed.error);
      return sendOpenAiError(reply, 400, problem.message, { param: problem.param });
    }
    const body = parsed.data;
    options.stats.imageRequests++;
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) options.stats.imageRequestsLeft++;
    });
    const markers = parseMarkers(body.prompt);
    if (markers.delayMs) await sleep(markers.delayMs);
    if (markers.errorStatus !== undefined) {
      return sendOpenAiError(reply, markers.errorStatus, `Simulated upstream error ${markers.errorStatus} ([sim:error=${markers.errorStatus}] in the prompt).`, markers.errorCode ? { code: markers.errorCode } : {});
    }

    const baseUrl = publicBaseUrl(request, options.baseUrl);
    const format = answerFormat(body.model, body.response_format);
    const data = Array.from({ length: body.n }, (_, index) => {
      const png = promptImage(body.prompt, index, body.size, (markers.imageKib ?? 0) * 1024);
      if (format === 'b64_json') return { b64_json: png.toString('base64') };
      const id = `img_${randomBytes(12).toString('hex')}`;
      options.images.add(id, png);
      return { url: `${baseUrl}/media/${id}.png` };
    });
    const inputTokens = countTokens(body.prompt);
    const outputTokens = outputTokensPerImage * body.n;
    return {
      created: Math.floor(options.clock() / 1000),
      data,
      usage: {
        total_tokens: inputTokens + outputTokens,
        input_tokens: inputTokens,
        output_tokens: outputTokens,
        input_tokens_details: { text_tokens: inputTokens, image_tokens: 0 },
      },
    };
  });
}
