import type { FastifyInstance } from 'fastify';

// Counters a test reads over HTTP to observe what the gateway did upstream, for instance that
// it really cancelled a chat stream when its own client went away. Not behind auth: the
// simulator only ever listens on loopback.

export class SimulatorStats {
  chatRequests = 0;
  chatStreamsAborted = 0;
  imageRequests = 0;
  /** Image requests whose caller left before the answer (a provider makes the images anyway). */
  imageRequestsLeft = 0;
  videoTasks = 0;
  /** Video submissions answered with an error: invalid body, [sim:reject] or [sim:flaky]. */
  videoSubmissionsRejected = 0;

  toJSON() {
    return {
      chat_requests: this.chatRequests,
      chat_streams_aborted: this.chatStreamsAborted,
      image_requests: this.imageRequests,
      image_requests_left: this.imageRequestsLeft,
      video_tasks: this.videoTasks,
      video_submissions_rejected: this.videoSubmissionsRejected,
    };
  }
}

export async function statsRoutes(app: FastifyInstance, options: { stats: SimulatorStats }): Promise<void> {
  app.get('/_sim/stats', async () => options.stats.toJSON());
}
