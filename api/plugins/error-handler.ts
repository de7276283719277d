import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { unavailableDependency, type Dependency } from '../../core/dependency-errors.ts';
import { GatewayError, type ErrorCode } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { HashingBusy } from '../../core/passwords.ts';
import { allowCrossOrigin, isCrossOriginPath } from './cross-origin.ts';
import { RouteMethodIndex } from './route-methods.ts';

// Every error leaves the gateway in the body of spec section 7. Fastify's own errors (content
// type, size; JSON parsing is plugins/json-body.ts) are translated by their code; anything unexpected becomes a
// 500 that names the request id and nothing else, so internals never leak.

/** The Retry-After of a 503 for an outage of the store or Temporal. */
const OUTAGE_RETRY_AFTER_SECONDS = 2;

const fastifyCodeMap: Record<string, { code: ErrorCode }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'unsupported_media_type' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'invalid_request' },
  FST_ERR_CTP_INVALID_TYPE: { code: 'unsupported_media_type' },
};

const unavailableMessages: Record<Dependency, string> = {
  store: 'The gateway cannot reach its database right now; retry with backoff.',
  temporal: 'The task queue is unavailable right now; retry with backoff.',
};

/** How a message names a field, by where it was sent. */
const fieldWords: Record<string, string> = { body: 'field', querystring: 'query parameter', params: 'path parameter', headers: 'header' };

function describePath(instancePath: string): string {
  return instancePath.replace(/^\//, '').replaceAll('/', '.');
}

export function toGatewayError(error: FastifyError, bodyLimit: number): GatewayError {
  if (error instanceof GatewayError) return error;
  if (hasZodFastifySchemaValidationErrors(error)) {
    const first = error.validation[0]!;
    const field = describePath(first.instancePath);
    const what = fieldWords[error.validationContext ?? 'body'] ?? `${error.validationContext} field`;
    // A field the schema does not name (strict objects: the video body, the admin API): named
    // as `param` like any other field at fault.
    const keys = first.keyword === 'unrecognized_keys' ? (first.params as { keys?: unknown }).keys : undefined;
    const unknownKey = Array.isArray(keys) && typeof keys[0] === 'string' ? keys[0] : undefined;
    if (unknownKey !== undefined) {
      // Cut like any id a caller sends (core/characters.ts quotedId): a name can be a megabyte.
      const unknown = (field ? `${field}.${unknownKey}` : unknownKey).slice(0, 100);
      const more = (keys as string[]).length > 1 ? ` (and ${(keys as string[]).length - 1} more)` : '';
      return new GatewayError('invalid_request', `Unknown ${what} '${unknown}'${more}: this endpoint does not take it.`, unknown);
    }
    const message = field ? `Invalid ${what} '${field}': ${first.message}` : `Invalid request: ${first.message}`;
    return new GatewayError('invalid_request', message, field || undefined);
  }
  const mapped = error.code ? fastifyCodeMap[error.code] : undefined;
  if (mapped) {
    if (mapped.code === 'payload_too_large') {
      return new GatewayError('payload_too_large', `The request body is larger than the limit of ${bodyLimit} bytes.`);
    }
    if (mapped.code === 'unsupported_media_type') {
      return new GatewayError('unsupported_media_type', 'Unsupported Content-Type; send application/json.');
    }
    return new GatewayError(mapped.code, error.message);
  }
  if (error.statusCode === 429) return new GatewayError('rate_limit_exceeded', error.message);
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return new GatewayError('invalid_request', error.message);
  }
  // Setting a console password while too many are being hashed (core/passwords.ts).
  if (error instanceof HashingBusy) return new GatewayError('service_unavailable', 'Too many passwords are being checked right now; retry in a few seconds.', undefined, { 'retry-after': '5' });
  // The store or Temporal not answering is an outage, not a bug: 503, which clients retry.
  const dependency = unavailableDependency(error);
  if (dependency) return new GatewayError('service_unavailable', unavailableMessages[dependency]);
  return new GatewayError('internal_error', 'The gateway failed to handle this request.');
}

async function errorHandlerPlugin(app: FastifyInstance): Promise<void> {
  // Registered first, so every later route passes through here.
  const routeMethods = new RouteMethodIndex();
  app.addHook('onRoute', (route) => {
    // The CORS preflight route answers OPTIONS on every /v1 path: it makes no path exist.
    if (route.method === 'OPTIONS' && (route.url ?? route.path).endsWith('*')) return;
    routeMethods.add(route.method, route.url ?? route.path);
  });

  /** 405 with `Allow` when the path exists with other methods, else 404. */
  function answerUnmatched(request: FastifyRequest, reply: FastifyReply): void {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = routeMethods.allowedFor(path);
    if (allowed.length > 0) {
      const error = new GatewayError('method_not_allowed', `${request.method} is not supported on ${path}; it supports ${allowed.join(', ')}.`);
      void reply.status(405).header('allow', allowed.join(', ')).send(error.toBody());
      return;
    }
    const paths = path.startsWith('/admin/')
      ? "The admin API's paths are /admin/accounts/{id} (with /keys, /credits, /deductions, /usage, /rate-limits) and /admin/keys/{id}; /openapi.json lists them all."
      : "The API's paths are /v1/models, /v1/chat/completions, /v1/images/generations and /v1/video/generations.";
    const error = new GatewayError('route_not_found', `No route for ${request.method} ${path}. ${paths}`);
    void reply.status(404).send(error.toBody());
  }

  app.setErrorHandler((error: FastifyError, request, reply) => {
    // The not-found route parses bodies too (e.g. a QUERY without Content-Type): whatever the
    // body's trouble, a request no route answers is a 404 or 405, not a 400 about its body.
    if (request.is404) return answerUnmatched(request, reply);
    // A POST with no body at all (and so no Content-Type) reaches the schema as nothing: say so
    // rather than "expected object, received null".
    const noBody = (request.body === undefined || request.body === null) && hasZodFastifySchemaValidationErrors(error) && error.validationContext === 'body';
    const gatewayError = noBody
      ? new GatewayError('empty_body', 'The request body is empty; send a JSON object with Content-Type: application/json.')
      : toGatewayError(error, request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? 0);
    const dependency = unavailableDependency(error);
    if (dependency) {
      // An outage answers every request with this; one short line each, no stack trace.
      request.log.warn({ dependency, reason: error.message }, 'dependency unavailable');
      // When to ask again: the driver looks for the store every 2 s (store/database.ts), and
      // Temporal's client reconnects as quickly. Clients that read no Retry-After back off alone.
      if (gatewayError.headers['retry-after'] === undefined) gatewayError.headers['retry-after'] = String(OUTAGE_RETRY_AFTER_SECONDS);
    } else if ((error instanceof GatewayError && error.cause === undefined && gatewayError.status === 503) || error instanceof HashingBusy) {
      // A refusal the gateway chose (a deadline passed, a queue too long, passwords being
      // hashed): no bug, so one short line and no stack trace, as for an outage. A 503 with a
      // cause that is no outage (a failed workflow start) is logged as the error below.
      request.log.warn({ code: gatewayError.code, reason: gatewayError.message }, 'request refused as unavailable');
    } else if (error instanceof GatewayError && error.code === 'upstream_error') {
      // The model provider's failure, not a bug: one line with what the provider said, no stack
      // trace, so a provider's outage does not bury the log in traces. An error when the
      // operator must act (its key refused, its quota spent: no retry helps), else a warning.
      const details = { code: error.code, reason: error.message, upstream: (error as { upstream?: unknown }).upstream };
      if (gatewayError.headers['x-should-retry'] === 'false') request.log.error(details, 'model provider refused the gateway');
      else request.log.warn(details, 'model provider failed');
    } else if (gatewayError.status >= 500) {
      request.log.error({ err: error }, 'request failed');
      if (gatewayError.code === 'internal_error') {
        gatewayError.message = `The gateway failed to handle this request (request id ${request.id}).`;
      }
    }
    void reply.status(gatewayError.status).headers(gatewayError.headers).send(gatewayError.toBody());
  });

  app.setNotFoundHandler((request, reply) => answerUnmatched(request, reply));

}

/** Fastify's `frameworkErrors` option: URLs the router refuses before any route or hook runs
 * (malformed percent-encoding, a path parameter over `maxParamLength`) get the spec's body too,
 * instead of Fastify's own. A parameter that long is longer than any id, so names nothing:
 * a 404, as for an unknown model or task (spec 7). */
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const gatewayError =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new GatewayError('resource_not_found', 'Nothing here: a path segment is longer than any id.')
      : new GatewayError('invalid_request', 'The request path is not a valid URL (malformed percent-encoding).');
  // No hook runs on this path: the headers every answer carries are set here (app.ts).
  reply.header('x-request-id', request.id);
  if (request.headers.origin !== undefined && isCrossOriginPath(request.url)) allowCrossOrigin(reply);
  void reply.status(gatewayError.status).send(gatewayError.toBody());
}

/** Fastify's `clientErrorHandler` option: a request Node's HTTP parser refused (headers over
 * 16 KB, a malformed request line or header, a request too slow to arrive) gets the spec's body
 * too, instead of Fastify's own `{"error": "Bad Request", "statusCode": 400}`. No route or hook
 * runs for it; the connection is closed after the answer, as the parser cannot go on. */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // A connection reset: nobody is there to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const gatewayError =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new GatewayError('headers_too_large', 'The request line and headers together are larger than 16 KB.')
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new GatewayError('request_timeout', 'The request did not arrive in time.')
        : new GatewayError('invalid_request', 'The request is not valid HTTP/1.1.');
  const body = JSON.stringify(gatewayError.toBody());
  if (socket.writable) {
    // No request was made of it, so no request id either: a fresh one, for the caller to quote.
    socket.write(
      `HTTP/1.1 ${gatewayError.status} ${STATUS_CODES[gatewayError.status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${newId('req')}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

export const errorHandler = fp(errorHandlerPlugin, { name: 'error-handler' });
