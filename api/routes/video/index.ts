import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import { videoTaskTransitions } from '../../../core/metrics.ts';
import { taskView, taskViewJson } from '../../../core/task-view.ts';
import { AUTHENTICATED_ERRORS, BODY_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { apiKeySecurity } from '../../openapi/security.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';
import { clipRequestOf, sendClip } from '../../clip-reply.ts';
import { openClip, type ClipSources } from '../../services/task-clips.ts';
import type { VideoTaskReads } from '../../services/video-task-reads.ts';
import type { VideoTaskService } from '../../services/video-tasks.ts';
import { idempotencyHeaders } from '../idempotency-header.ts';
import { resolveModelFirst } from '../model-resolution.ts';
import { listPage } from '../list-query.ts';
import { submissionResponse, taskList, taskListQuery, taskParams, videoTaskView } from './schemas.ts';
import { videoSubmissionBodyFor } from './submission-schema.ts';

export interface VideoRouteOptions extends ClipSources {
  catalog: Catalog;
  submissions: VideoTaskService;
  reads: VideoTaskReads;
  publicBaseUrl: string;
}

const clipResponse = {
  description: 'The clip, streamed from a vendor whose downloads need the vendor key.',
  content: { 'video/mp4': { schema: z.string().meta({ contentMediaType: 'video/mp4' }) } },
};

const clipPart = {
  description: 'The part of a streamed clip the `Range` header asked for; `Content-Range` says which.',
  content: { 'video/mp4': { schema: z.string().meta({ contentMediaType: 'video/mp4' }) } },
};

const clipRedirect = z.undefined().meta({
  description: 'The clip is at a public address: `Location` points to it.',
  headers: { location: { type: 'string', format: 'uri', description: 'The clip’s download address.' } },
});

export const videoRoutes: FastifyPluginAsyncZod<VideoRouteOptions> = async (app, options) => {
  app.post(
    '/video/generations',
    {
      schema: {
        tags: ['video'],
        operationId: 'createVideoTask',
        summary: 'Submit a video generation task',
        description: 'Validates the request against the model, holds the price on the balance and starts the task. Poll the task, or pass metadata.callback_url.',
        security: apiKeySecurity,
        headers: idempotencyHeaders,
        body: videoSubmissionBodyFor(options.catalog),
        response: { 200: submissionResponse, ...errorResponses(...BODY_ERRORS, 403, 404, 409, 422, ...AUTHENTICATED_ERRORS) },
      },
      preValidation: [
        // Spec 4.1 rule 1: say where callback_url belongs instead of a bare "unrecognized key".
        async (request) => {
          const body = request.body as unknown as Record<string, unknown> | null;
          if (body && typeof body === 'object' && 'callback_url' in body) {
            throw new GatewayError('invalid_request', 'callback_url belongs inside metadata: send it as metadata.callback_url.', 'callback_url');
          }
        },
        resolveModelFirst(options.catalog, 'video'),
      ],
    },
    async (request) => {
      const submitted = await options.submissions.submit(principalOf(request), request.body, request.id, request.idempotency?.taskId);
      videoTaskTransitions.inc({ state: 'submitted', model: request.body.model });
      return submitted;
    },
  );

  app.get(
    '/video/generations',
    {
      schema: {
        tags: ['video'],
        operationId: 'listVideoTasks',
        summary: "List the account's video tasks",
        description: 'Newest first, every key of the account; for a key restricted to some models, the tasks it submitted and those of its models. Page with `after` (the `last_id` of the page before) while `has_more` is true; an `after` naming a task deleted meanwhile (past the operator’s TASK_RETENTION_DAYS) is a 404, and the walk starts again. A submission that was answered with an error (or never answered) left no task here.',
        security: apiKeySecurity,
        querystring: taskListQuery,
        response: { 200: taskList, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) },
      },
    },
    async (request) => {
      const { tasks, hasMore } = await options.reads.list(principalOf(request), request.query);
      const data = tasks.map((task) => taskView(task, options.publicBaseUrl) as z.infer<typeof videoTaskView>);
      return listPage(data, tasks.map((task) => task._id), hasMore);
    },
  );

  app.get(
    '/video/generations/:task_id',
    {
      schema: {
        tags: ['video'],
        operationId: 'getVideoTask',
        summary: 'Read a video task',
        description: 'The same JSON the webhook delivers. Another account’s task is a 404, as is a finished task past the operator’s retention (TASK_RETENTION_DAYS, off unless set); a task of a model the key may not use, submitted by another key of the account, is a 403.',
        security: apiKeySecurity,
        params: taskParams,
        // 400: a path whose percent-encoding is malformed (api/plugins/error-handler.ts).
        response: { 200: videoTaskView, ...errorResponses(400, 403, 404, ...AUTHENTICATED_ERRORS) },
      },
    },
    async (request, reply) => {
      const task = await options.reads.find(principalOf(request), request.params.task_id);
      // Sent as the exact string the webhook carries for the same snapshot (a string payload skips
      // the serializer; the schema above still documents the shape).
      const json = taskViewJson(task, options.publicBaseUrl);
      return reply.type('application/json; charset=utf-8').send(json as unknown as z.infer<typeof videoTaskView>);
    },
  );

  // Clips from vendors whose download needs the vendor's key are streamed through the gateway.
  app.get(
    '/video/generations/:task_id/content',
    {
      schema: {
        tags: ['video'],
        operationId: 'downloadVideoContent',
        summary: 'Download a finished clip',
        description:
          "Works for every model with the API key: a clip the vendor serves publicly is a 302 to the vendor's address (which expires when the vendor says: Seedance's after 24 hours), any other is streamed through the gateway. A task's `url` is this address for vendors whose downloads need the vendor's key (sora-2), and the vendor's own address otherwise.",
        security: apiKeySecurity,
        params: taskParams,
        response: { 200: clipResponse, 206: clipPart, 302: clipRedirect, ...errorResponses(400, 403, 404, 409, 416, 502, ...AUTHENTICATED_ERRORS) },
      },
    },
    async (request, reply) => {
      const clip = await openClip(await options.reads.find(principalOf(request), request.params.task_id), options, clipRequestOf(request));
      return sendClip(reply, clip);
    },
  );
};
