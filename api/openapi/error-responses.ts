import { z } from 'zod';
import { errorCatalog, type ErrorCode } from '../../core/errors.ts';

// The error body of spec section 7, declared per status for the OpenAPI document. Each status
// lists exactly the codes (and error types) the registry gives it, so the document cannot
// promise a code a status never carries, and a new registry entry appears here by itself.
// These schemas also serialize the error replies, so a body that strayed from the registry
// would fail loudly in the tests instead of reaching a caller.

export type ErrorStatus = (typeof errorCatalog)[ErrorCode]['status'];

const descriptions: Record<ErrorStatus, string> = {
  400: 'Missing required parameter or malformed body (`param` names the field), or more than one `Authorization` header.',
  401: 'Missing, invalid or revoked credentials.',
  403: 'The key may not use the model, or the balance does not cover the price.',
  404: 'Unknown model, task, account or key.',
  405: 'The path exists, but not with this method; `Allow` lists the methods it has.',
  408: 'The request did not arrive in time (answered before any route runs).',
  409: 'The request conflicts with the state of the resource.',
  413: 'The request body is larger than the configured limit.',
  415: 'The body is not `application/json`.',
  416: 'The `Range` asked for starts past the end of the clip; `Content-Range` gives its length.',
  422: 'The request repeats an idempotency key with a different body.',
  429: 'Rate limit exceeded; retry after the delay in `Retry-After` when it is given, else with backoff.',
  431: 'The request line and headers are larger than 16 KB (answered before any route runs).',
  500: 'The gateway failed; the message names the request id and nothing else.',
  502: 'The upstream provider failed or answered something unusable; nothing was charged.',
  503: 'A dependency (store, Temporal, upstream, DNS for a name in a URL the request gives) is unavailable; retry with backoff.',
};

function typesFor(status: ErrorStatus): [string, ...string[]] {
  const types = new Set(Object.values(errorCatalog).filter((entry) => entry.status === status).map((entry) => entry.type));
  return [...types] as [string, ...string[]];
}

function codesFor(status: ErrorStatus): [ErrorCode, ...ErrorCode[]] {
  return (Object.keys(errorCatalog) as ErrorCode[]).filter((code) => errorCatalog[code].status === status) as [ErrorCode, ...ErrorCode[]];
}

/** The error object of one status: `{error: {message, type, code, param?}}`. */
export function errorObjectFor(status: ErrorStatus) {
  return z.object({
    message: z.string().describe('What went wrong and how to fix it.'),
    type: z.enum(typesFor(status)).describe('The kind of error.'),
    code: z.enum(codesFor(status)).describe('The stable code of this error.'),
    param: z.string().optional().describe('The request field at fault, as a dotted path.'),
  });
}

const errorBodies = new Map<ErrorStatus, z.ZodType>();

/** The whole error body of one status, registered once as the component `Error<status>`. */
export function errorBodyFor(status: ErrorStatus): z.ZodType {
  let body = errorBodies.get(status);
  if (!body) {
    body = z.object({ error: errorObjectFor(status) }).meta({ id: `Error${status}`, description: descriptions[status] });
    errorBodies.set(status, body);
  }
  return body;
}

/** Response schemas for the given error statuses, to spread into a route's `response`. */
export function errorResponses(...statuses: ErrorStatus[]): Record<number, z.ZodType> {
  return Object.fromEntries(statuses.map((status) => [status, errorBodyFor(status)]));
}

/** What every route behind an API key or the admin token may answer besides its own errors
 * (the 400: more than one Authorization header, api/plugins/authorization-header.ts; the 429:
 * rate limits, or too many unknown keys or wrong admin tokens from one address; the 503: the
 * store is down, or the admin API is off for want of ADMIN_TOKEN). */
export const AUTHENTICATED_ERRORS: ErrorStatus[] = [400, 401, 429, 500, 503];

/** What a route that reads a JSON body may answer about the body itself. */
export const BODY_ERRORS: ErrorStatus[] = [400, 413, 415];
