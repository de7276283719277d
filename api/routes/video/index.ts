import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { GatewayError } from '../../../core/errors.ts';
import { taskViewJson } from '../../../core/task-view.ts';
import type { VideoVendor } from '../../../vendors/types.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';
import type { VideoTaskService } from '../../services/video-tasks.ts';
import { submissionResponse, taskParams, videoSubmissionBody, videoTaskView } from './schemas.ts';

export interface VideoRouteOptions {
  service: VideoTaskService;
  publicBaseUrl: string;
  vendorFor: (upstream: string) => VideoVendor;
  upstreamOf: (modelId: string) => string | undefined;
}

export const videoRoutes: FastifyPluginAsyncZod<VideoRouteOptions> = async (app, options) => {
  app.post(
    '/video/generations',
    {
      schema: { body: videoSubmissionBody, response: { 200: submissionResponse } },
      // Spec 4.1 rule 1: say where callback_url belongs instead of a bare "unrecognized key".
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null;
        if (body && typeof body === 'object' && 'callback_url' in body) {
          throw new GatewayError('invalid_request', 'callback_url belongs inside metadata: send it as metadata.callback_url.', 'callback_url');
        }
      },
    },
    async (request) => options.service.submit(principalOf(request), request.body, request.id, request.idempotency?.taskId),
  );

  app.get('/video/generations/:task_id', { schema: { params: taskParams, response: { 200: videoTaskView } } }, async (request, reply) => {
    const task = await options.service.find(principalOf(request), request.params.task_id);
    // Sent as the exact string the webhook carries for the same snapshot (a string payload skips
    // the serializer; the schema above still documents the shape).
    const json = taskViewJson(task, options.publicBaseUrl);
    return reply.type('application/json; charset=utf-8').send(json as unknown as z.infer<typeof videoTaskView>);
  });

  // Clips from vendors whose download needs the vendor's key are streamed through the gateway.
  app.get('/video/generations/:task_id/content', { schema: { params: taskParams } }, async (request, reply) => {
    const task = await options.service.find(principalOf(request), request.params.task_id);
    if (task.status !== 'succeeded') {
      throw new GatewayError('invalid_request', `The task is ${task.status}; its clip is downloadable once it has succeeded.`, 'task_id');
    }
    if (task.url) return reply.redirect(task.url, 302);
    const upstream = options.upstreamOf(task.model);
    const vendor = upstream ? options.vendorFor(upstream) : undefined;
    if (!vendor?.openContent || !task.vendor_task_id) throw new GatewayError('task_not_found', 'The clip of this task is no longer available.');
    const content = await vendor.openContent(task.vendor_task_id);
    return reply.type(content.contentType).send(content.body);
  });
};
