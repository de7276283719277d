import { GatewayError, type ErrorCode } from '../../../core/errors.ts';
import { vendorErrors } from '../../../core/metrics.ts';
import { readUpstreamError } from '../../../core/upstream-error-body.ts';
import type { UpstreamResponse } from './upstream-client.ts';
import type { WholeAnswer } from './whole-answer.ts';

// An upstream's refusal, translated into the gateway's error body (spec 7). A 4xx about the
// request (400, 409, 413, 415, 422) is the caller's problem and keeps its status and the
// upstream's own words, with OpenAI's codes clients act on (context_length_exceeded, ...) kept.
// A 429 keeps Retry-After so OpenAI clients back off as asked; every 5xx becomes 502.
//
// Some refusals are about the operator's setup, not the caller's request, and become 502s the
// operator must fix: a 401 (the gateway's key for the upstream is wrong; the caller's was
// accepted here), a 403 (the operator's project may not use the upstream model, or its region
// is not served), a 404 (the catalog names an upstream model that does not exist: the caller
// asked for a model /v1/models lists) and a 429 for quota (`insufficient_quota`: the operator's
// account is out of credit, no limit a retry outwaits). They carry `x-should-retry: false`,
// which the OpenAI SDKs obey: a retry would only be refused again.
//
// The upstream's words about those, a 429 or a 5xx concern the operator's account with the
// provider: they name its organisation or project, the upstream model and its limits; a
// proxy's 5xx page may name hosts. The caller gets the gateway's own sentence; the upstream's
// goes to the log (the error handler logs 5xx whole, and `upstream` is on the error).

const MAX_ERROR_BODY_CHARACTERS = 16_384;

/** OpenAI's codes for a 400 that are passed on as they came (core/errors.ts lists them). */
const providerCodes = new Set<string>(['context_length_exceeded', 'content_policy_violation', 'moderation_blocked', 'unsupported_parameter', 'unsupported_value']);

/** What the operator must fix, by upstream status: the end of the caller's message. */
const operatorFaults: Partial<Record<number, string>> = {
  401: 'refused the gateway\'s credentials; the operator must fix the upstream key',
  403: 'refused the gateway\'s account access to this model; the operator must fix the upstream setup',
  404: 'does not know the upstream model this gateway maps the model to; the operator must fix the catalog',
};

const noRetry = { 'x-should-retry': 'false' };

const codeByStatus: Partial<Record<number, ErrorCode>> = {
  400: 'invalid_request',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'invalid_request',
};

/** The provider's wait, as it gave it: Retry-After (seconds), and retry-after-ms, which
 * OpenAI sends and its SDKs read first. A wait given only in milliseconds is also given in
 * whole seconds, for clients that read Retry-After alone. */
function retryHeaders(upstream: WholeAnswer['headers']): Record<string, string> {
  const headers: Record<string, string> = {};
  const seconds = upstream['retry-after'];
  const milliseconds = upstream['retry-after-ms'];
  if (typeof milliseconds === 'string' && /^\d+(\.\d+)?$/.test(milliseconds)) {
    headers['retry-after-ms'] = milliseconds;
    headers['retry-after'] = String(Math.ceil(Number(milliseconds) / 1000));
  }
  if (typeof seconds === 'string') headers['retry-after'] = seconds;
  return headers;
}

/** The GatewayError for a non-2xx upstream answer read whole. Counts the refusal on the
 * vendor-errors metric (5xx and 429 pass, but a 429 for quota lasts until the operator pays;
 * other 4xx are final), then translates it. */
export function upstreamRefusal(answer: WholeAnswer, upstream: string): GatewayError {
  const status = answer.statusCode;
  const detail = readUpstreamError(answer.text.slice(0, MAX_ERROR_BODY_CHARACTERS));
  const passes = status >= 500 || (status === 429 && detail.code !== 'insufficient_quota');
  vendorErrors.inc({ vendor: upstream, kind: passes ? 'transient' : 'rejected' });
  const headers = retryHeaders(answer.headers);
  const retryAfter = headers['retry-after'];

  const forLog = (error: GatewayError) => Object.assign(error, { upstream: { status, message: detail.message, code: detail.code } });
  if (status >= 500) {
    return forLog(new GatewayError('upstream_error', `The model provider failed (${status}). Nothing was charged; retry with backoff.`, undefined, headers));
  }
  const operatorFault = operatorFaults[status];
  if (operatorFault) {
    return forLog(new GatewayError('upstream_error', `The model provider ${operatorFault}. Nothing was charged.`, undefined, noRetry));
  }
  if (status === 429 && detail.code === 'insufficient_quota') {
    return forLog(new GatewayError('upstream_error', 'The model provider refused the call: the gateway\'s account with it is out of quota, which the operator must fix. Nothing was charged.', undefined, noRetry));
  }
  if (status === 429) {
    const wait = typeof retryAfter === 'string' && /^\d+$/.test(retryAfter) ? `Retry after ${retryAfter} s.` : 'Retry with backoff.';
    return new GatewayError('rate_limit_exceeded', `The model provider is rate limiting calls to this model right now; nothing was charged. ${wait}`, undefined, headers);
  }
  const code = status === 400 && detail.code !== undefined && providerCodes.has(detail.code) ? (detail.code as ErrorCode) : codeByStatus[status];
  // The OpenAI SDKs retry a 409 unless told not to; the provider's refusal stands (spec 7
  // rule 3: nothing below 500 is retried).
  if (code) return new GatewayError(code, detail.message, detail.param, status === 409 ? { ...headers, ...noRetry } : headers);
  // Any other status (402, 407, 451, ...): unexpected from a model provider, and a proxy's
  // page in front of it may name hosts; its words go to the log. Another try gets the same
  // answer (and the OpenAI SDKs make two on a 502 unless told not to), except after a 408.
  const retry = status === 408 ? headers : { ...headers, ...noRetry };
  return forLog(new GatewayError('upstream_error', `The model provider answered ${status}. Nothing was charged.`, undefined, retry));
}

/** upstreamRefusal for an answer whose body was left to stream: reads what the message needs
 * of it (at most MAX_ERROR_BODY_CHARACTERS characters' worth of bytes), then drops the rest. */
export async function streamedRefusal(response: UpstreamResponse, upstream: string): Promise<GatewayError> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of response.body) {
      chunks.push(chunk as Buffer);
      bytes += (chunk as Buffer).length;
      // UTF-8 takes up to 4 bytes a character.
      if (bytes >= MAX_ERROR_BODY_CHARACTERS * 4) break;
    }
  } catch {
    // What the upstream said is lost past this point; its status still tells what happened.
  } finally {
    response.body.destroy();
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return upstreamRefusal({ statusCode: response.statusCode, headers: response.headers, text }, upstream);
}

/** A 2xx completion that carries an error object instead of choices: a failure in the
 * provider's words, which go to the log (they can name the operator's organisation). */
export function errorInSuccessfulAnswer(what: string, error: unknown): GatewayError {
  return Object.assign(new GatewayError('upstream_error', `The model provider answered with an error instead of a ${what}; nothing was charged. Retry later.`), {
    upstream: { status: 200, message: typeof error === 'object' && error !== null && 'message' in error ? String((error as { message: unknown }).message) : String(error) },
  });
}

/** A 2xx whose body is not what the protocol promises. */
export function malformedUpstreamAnswer(what: string): GatewayError {
  return new GatewayError('upstream_error', `The model provider sent a malformed ${what}; nothing was charged. Retry later.`);
}
