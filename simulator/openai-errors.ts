import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { hasBearerToken } from './bearer.ts';

// OpenAI's error body `{error: {message, type, param, code}}` and the conventions shared by
// every OpenAI-style route: bearer auth, parser errors and unknown paths in that same shape.

interface ErrorKind {
  type: string;
  code: string | null;
}

const kindsByStatus: Record<number, ErrorKind> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'permission_error', code: null },
  404: { type: 'invalid_request_error', code: 'not_found' },
  409: { type: 'invalid_request_error', code: 'conflict' },
  413: { type: 'invalid_request_error', code: 'request_too_large' },
  415: { type: 'invalid_request_error', code: 'unsupported_media_type' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
};

function kindOf(status: number): ErrorKind {
  return kindsByStatus[status] ?? (status >= 500 ? { type: 'server_error', code: null } : { type: 'invalid_request_error', code: null });
}

/** Statuses after which OpenAI clients are told when to come back. */
export function retryAfterSecondsFor(status: number): number | undefined {
  return status === 429 || status === 503 ? 1 : undefined;
}

export function sendOpenAiError(
  reply: FastifyReply,
  status: number,
  message: string,
  details: { param?: string | null; code?: string | null } = {},
): FastifyReply {
  const kind = kindOf(status);
  const retryAfter = retryAfterSecondsFor(status);
  if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter));
  return reply.code(status).send({
    error: { message, type: kind.type, param: details.param ?? null, code: details.code === undefined ? kind.code : details.code },
  });
}

/** Installs auth, error and not-found handling on an encapsulated OpenAI-style scope. */
export function useOpenAiConventions(scope: FastifyInstance): void {
  scope.addHook('onRequest', async (request, reply) => {
    if (!hasBearerToken(request)) {
      return sendOpenAiError(reply, 401, 'You didn\'t provide an API key. Provide it in the Authorization header as "Bearer <key>".');
    }
  });
  scope.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'simulator route failed');
    return sendOpenAiError(reply, status, status >= 500 ? 'The simulator failed to handle the request.' : error.message);
  });
  scope.setNotFoundHandler((request, reply) =>
    sendOpenAiError(reply, 404, `Invalid URL (${request.method} ${request.url})`, { code: null }),
  );
}
