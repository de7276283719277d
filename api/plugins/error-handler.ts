import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { GatewayError, type ErrorCode } from '../../core/errors.ts';

// Every error leaves the gateway in the body of spec section 7. Fastify's own errors (content
// type, size; JSON parsing is plugins/json-body.ts) are translated by their code; anything unexpected becomes a
// 500 that names the request id and nothing else, so internals never leak.

const fastifyCodeMap: Record<string, { code: ErrorCode; message?: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'unsupported_media_type' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'invalid_request' },
  FST_ERR_CTP_INVALID_TYPE: { code: 'unsupported_media_type' },
};

function describePath(instancePath: string): string {
  return instancePath.replace(/^\//, '').replaceAll('/', '.');
}

export function toGatewayError(error: FastifyError, bodyLimit: number): GatewayError {
  if (error instanceof GatewayError) return error;
  if (hasZodFastifySchemaValidationErrors(error)) {
    const first = error.validation[0]!;
    const field = describePath(first.instancePath);
    const where = error.validationContext === 'body' || !error.validationContext ? '' : `${error.validationContext} `;
    const message = field ? `Invalid ${where}field '${field}': ${first.message}` : `Invalid ${where}request: ${first.message}`;
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
    return new GatewayError(mapped.code, mapped.message ?? error.message);
  }
  if (error.statusCode === 429) return new GatewayError('rate_limit_exceeded', error.message);
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return new GatewayError('invalid_request', error.message);
  }
  return new GatewayError('internal_error', 'The gateway failed to handle this request.');
}

async function errorHandlerPlugin(app: FastifyInstance): Promise<void> {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const gatewayError = toGatewayError(error, app.initialConfig.bodyLimit ?? 0);
    if (gatewayError.status >= 500) {
      request.log.error({ err: error }, 'request failed');
      if (gatewayError.code === 'internal_error') {
        gatewayError.message = `The gateway failed to handle this request (request id ${request.id}).`;
      }
    }
    void reply.status(gatewayError.status).headers(gatewayError.headers).send(gatewayError.toBody());
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    const error = new GatewayError('route_not_found', `No route for ${request.method} ${path}. The API lives under /v1; see the README.`);
    void reply.status(404).send(error.toBody());
  });
}

export const errorHandler = fp(errorHandlerPlugin, { name: 'error-handler' });
