import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { ImageStore } from './image-store.ts';
import { mediaRoutes } from './media.ts';
import { chatRoutes } from './openai-chat.ts';
import { useOpenAiConventions } from './openai-errors.ts';
import { imageRoutes } from './openai-images.ts';
import { openAiVideoRoutes, type OpenAiVideoDetails } from './openai-videos.ts';
import { seedanceRoutes, type SeedanceDetails } from './seedance.ts';
import { SimulatorStats, statsRoutes } from './stats.ts';
import { SubmissionGate } from './submission-gate.ts';
import { VideoTaskStore, type Clock } from './video-tasks.ts';

// The local vendor simulator: real vendor wire formats on loopback so the whole gateway runs
// and is tested offline. Built without listening so tests choose the port (usually 0) and
// server.ts only adds the socket. All state is in memory and belongs to this instance.

export interface SimulatorOptions {
  /** Drives video task progress; tests inject one they can move forward. */
  clock?: Clock;
  /** Public address used in result URLs; by default the Host the caller used. */
  baseUrl?: string;
  /** Fastify logger options; off unless asked, since tests build many simulators. */
  logger?: boolean | object;
  /** Log every request; off by default because a polling gateway makes it mostly noise. */
  logRequests?: boolean;
}

export function buildSimulator(options: SimulatorOptions = {}): FastifyInstance {
  const clock = options.clock ?? Date.now;
  const app = Fastify({
    logger: options.logger ?? false,
    logController: new LogController({ disableRequestLogging: !options.logRequests }),
    return503OnClosing: true,
  });

  const stats = new SimulatorStats();
  const gate = new SubmissionGate();
  const images = new ImageStore();
  const seedanceTasks = new VideoTaskStore<SeedanceDetails>();
  const openAiVideos = new VideoTaskStore<OpenAiVideoDetails>();

  // Paths outside both vendors' prefixes answer in a neutral shape; each vendor scope below
  // answers its own unknown paths in its own error shape.
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({ error: { message: `No simulated endpoint at ${request.method} ${request.url}.`, code: 'not_found' } }),
  );
  // Plugins are queued without await so the builder stays synchronous (callers write
  // `buildSimulator().listen(...)`); Fastify loads them in order on ready() or listen().
  void app.register(statsRoutes, { stats });
  void app.register(mediaRoutes, {
    images,
    hasFinishedClip: (taskId) => seedanceTasks.hasFinishedClip(taskId, clock()) || openAiVideos.hasFinishedClip(taskId, clock()),
  });
  void app.register(seedanceRoutes, { prefix: '/api/v3', tasks: seedanceTasks, gate, stats, clock, baseUrl: options.baseUrl });
  void app.register(
    async (openAi) => {
      useOpenAiConventions(openAi);
      await openAi.register(openAiVideoRoutes, { videos: openAiVideos, gate, stats, clock });
      await openAi.register(chatRoutes, { stats, clock });
      await openAi.register(imageRoutes, { images, stats, clock, baseUrl: options.baseUrl });
    },
    { prefix: '/v1' },
  );
  return app;
}
