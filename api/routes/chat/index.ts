import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import type { HostNameCheck, NamedHost } from '../../../core/host-names.ts';
import type { Allowlist } from '../../../core/outbound-guard.ts';
import { internalMediaAddressIn } from '../../services/openai-proxy/message-media-addresses.ts';
import { AUTHENTICATED_ERRORS, BODY_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { apiKeySecurity } from '../../openapi/security.ts';
import { principalOf } from '../../plugins/api-key-auth.ts';
import type { CallsInFlight } from '../../services/openai-proxy/calls-in-flight.ts';
import type { ChatProxy } from '../../services/openai-proxy/chat-proxy.ts';
import { ClientDisconnect } from '../../services/openai-proxy/client-disconnect.ts';
import { logCallerLeft } from '../../plugins/request-log.ts';
import { resolveModelFirst } from '../model-resolution.ts';
import { chatCompletionBodyFor, chatCompletionResponse, chatStreamEvent } from './schemas.ts';

export interface ChatRouteOptions {
  catalog: Catalog;
  chat: ChatProxy;
  calls: CallsInFlight;
  /** Closes the upstream pools when the app closes. */
  closeProxies: () => Promise<void>;
  /** The largest body taken here (CHAT_BODY_LIMIT_BYTES: images come inline as base64). */
  bodyLimit: number;
  /** OUTBOUND_ALLOWLIST: internal addresses media URLs in messages may name. */
  outboundAllowlist: Allowlist;
  /** Judges the names of media URLs by their addresses. */
  hostNames: HostNameCheck;
}

export const chatRoutes: FastifyPluginAsyncZod<ChatRouteOptions> = async (app, options) => {
  app.addHook('onClose', async () => options.closeProxies());

  const schema = {
    tags: ['chat'],
    operationId: 'createChatCompletion',
    summary: 'Create a chat completion (OpenAI-compatible)',
    description:
      'Parameters not named here are passed to the upstream as they came (integers beyond 2^53 as written; numbers with a fraction or exponent as the nearest double). The worst-case price is held before the call; what the upstream reports is charged, a failed call is not. `Idempotency-Key` is not honoured here (as on the OpenAI API): a call sent twice runs and is billed twice.',
    security: apiKeySecurity,
    body: chatCompletionBodyFor(options.catalog),
    response: {
      200: {
        description: 'The completion; with `stream: true`, Server-Sent Events ending with `data: [DONE]`.',
        content: { 'application/json': { schema: chatCompletionResponse }, 'text/event-stream': { schema: chatStreamEvent } },
      },
      // The upstream's 400, 409, 413, 415 and 429 keep their status (a 429 for quota does not),
      // its 422 becomes 400; its 401, 403, 404, 5xx and any other status become 502
      // (upstream-errors.ts). The 403 and 404 here are the gateway's own (the key, the model).
      ...errorResponses(...BODY_ERRORS, 403, 404, 409, 502, ...AUTHENTICATED_ERRORS),
    },
  };

  app.post('/chat/completions', { schema, bodyLimit: options.bodyLimit, config: { verbatimIntegers: true }, preValidation: resolveModelFirst(options.catalog, 'chat') }, async (request, reply) => {
    const principal = principalOf(request);
    // Before anything is held or sent: the upstream would fetch these for the caller.
    const names: NamedHost[] = [];
    const internal = internalMediaAddressIn(request.body.messages, options.outboundAllowlist, names);
    if (internal) throw new GatewayError('invalid_request', internal.message, internal.param);
    // Most calls name no host: they skip the await (and its turn of the event loop).
    if (names.length > 0) {
      // What needs no DNS answer first: a caller refused for its key or body hears so at once.
      options.chat.refuseUnservable(principal, request.body);
      const leadsInside = await options.hostNames.refusalError(names, () => 'a model provider', request.log);
      if (leadsInside) throw leadsInside;
    }
    const context = { signal: new ClientDisconnect(reply.raw, options.calls), log: request.log, setHeaders: (headers: Record<string, string>) => reply.headers(headers), receivedAt: performance.now() - reply.elapsedTime };
    try {
      if (request.body.stream !== true) {
        const json = await options.chat.complete(principal, request.body, context);
        // The upstream's text as is: a string payload skips the serializer (the schema documents it).
        return reply.type('application/json; charset=utf-8').send(json as unknown as z.infer<typeof chatCompletionResponse>);
      }
      const stream = await options.chat.openStream(principal, request.body, context);
      reply.hijack();
      // A hijacked reply writes its own head: carry over what hooks set (the rate-limit headers).
      const headers = Object.fromEntries(Object.entries(reply.getHeaders()).map(([name, value]) => [name, String(value)]));
      await stream.pipeTo(reply.raw, { ...headers, 'x-request-id': request.id });
      if (context.signal.callerGone) logCallerLeft(request, reply);
      return reply;
    } catch (error) {
      // The caller left before the answer: there is nobody to send an error to.
      if (context.signal.callerGone) {
        logCallerLeft(request, reply);
        return reply.hijack();
      }
      throw error;
    }
  });
};
