// Response headers in the OpenAPI document. The routes' zod schemas describe bodies only, so
// the headers the answers carry are added to the finished document here, by operation and
// status, for generated clients and readers to see.

interface Header {
  description: string;
  schema: { type: 'string'; enum?: string[] };
}

const text = (description: string): Header => ({ description, schema: { type: 'string' } });

/** On every answer (api/app.ts sets it on arrival). */
const requestId = { 'x-request-id': text('The request id; the log and a 500 name it.') };

/** On every answer of a /v1 route whose key was accepted (api/plugins/rate-limit.ts); not on
 * one refused before the key was checked (a malformed path, the store unreachable). */
const requestLimits = {
  'x-ratelimit-limit-requests': text('Requests this key may make per minute (on answers to requests whose key was checked).'),
  'x-ratelimit-remaining-requests': text('Requests left in the current minute.'),
  'x-ratelimit-reset-requests': text('When the minute ends, e.g. `12s`.'),
};

/** On chat answers once the body and the model passed their checks
 * (api/services/openai-proxy/chat-proxy.ts): a success, a token-limit 429, a balance 403, an
 * upstream's refusal or failure. */
const tokenLimits = {
  'x-ratelimit-limit-tokens': text('Tokens this key may use per minute (on chat answers to calls whose body and model passed their checks).'),
  'x-ratelimit-remaining-tokens': text('Tokens left in the current minute.'),
  'x-ratelimit-reset-tokens': text('When the minute ends, e.g. `12s`.'),
};

/** Admin creations that answer a retry under their Idempotency-Key with what the first made. */
const CREATIONS_REPLAYED = new Set(['createAccount', 'createKey']);

/** On an answer replayed for a repeated Idempotency-Key (api/plugins/idempotency.ts). */
const replayed = {
  'idempotent-replayed': { description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } } satisfies Header,
};

/** On 429s, and on 502s and 503s that know when to come back. */
const retryAfter = { 'retry-after': text('Seconds to wait before retrying, when known.') };

/** Beside Retry-After when a model provider gave its wait in milliseconds, which OpenAI sends
 * and its SDKs read first (api/services/openai-proxy/upstream-errors.ts). */
const retryAfterMs = { 'retry-after-ms': text('The model provider\'s wait in milliseconds, when it gave one (Retry-After then says it in whole seconds).') };
const UPSTREAM_OPERATIONS = new Set(['createChatCompletion', 'createImage']);

/** On 502s a retry cannot cure (the operator's upstream setup; api/services/openai-proxy/upstream-errors.ts),
 * on a clip asked for before its task succeeded (api/services/task-clips.ts), and on a chat
 * call larger than its key's whole minute of tokens (api/services/rate-limits/rate-limiter.ts). */
const shouldRetry = { 'x-should-retry': { description: '`false` when retrying at once cannot help: the operator must fix the upstream setup, the task has no clip yet (or ever), the provider\'s answer was too large to read whole or a conflict (409) of its own, or a chat call\'s prompt alone is more than its key\'s tokens per minute.', schema: { type: 'string', enum: ['false'] } } satisfies Header };

/** On a clip streamed through the gateway (api/clip-reply.ts): the vendor's, when it sent them. */
const clipHeaders = {
  'content-length': text('The clip’s length in bytes (of the part, on a 206).'),
  'accept-ranges': text('`bytes` when the vendor serves parts of the clip (Range).'),
  etag: text('The vendor’s validator of the clip, for If-Range.'),
  'last-modified': text('The vendor’s date of the clip, for If-Range.'),
};
const contentRange = { 'content-range': text('Which bytes of the clip this is (`bytes 0-99/2503`), or, on a 416, its length (`bytes */2503`).') };

const IDEMPOTENT_OPERATIONS = new Set(['createVideoTask', 'createImage']);

interface Operation {
  operationId?: string;
  responses?: Record<string, { headers?: Record<string, Header> }>;
}

/** Adds the headers to a finished document. */
export function withResponseHeaders<Document extends object>(document: Document): Document {
  const paths = (document as { paths?: Record<string, Record<string, unknown>> }).paths ?? {};
  for (const [path, pathItem] of Object.entries(paths)) {
    for (const operation of Object.values(pathItem) as Operation[]) {
      if (!operation || typeof operation !== 'object' || !operation.responses) continue;
      for (const [status, response] of Object.entries(operation.responses)) {
        const code = Number(status);
        response.headers = {
          ...response.headers,
          ...requestId,
          ...(path.startsWith('/v1/') && code !== 401 ? requestLimits : {}),
          ...(operation.operationId === 'createChatCompletion' && code !== 401 && code !== 404 ? tokenLimits : {}),
          ...((IDEMPOTENT_OPERATIONS.has(operation.operationId ?? '') && code === 200) || (CREATIONS_REPLAYED.has(operation.operationId ?? '') && code === 201) ? replayed : {}),
          // And on the 409 for a duplicate of an Idempotency-Key request still in progress.
          ...(code === 429 || code === 502 || code === 503 || (IDEMPOTENT_OPERATIONS.has(operation.operationId ?? '') && code === 409) ? retryAfter : {}),
          ...(UPSTREAM_OPERATIONS.has(operation.operationId ?? '') && (code === 429 || code === 502) ? retryAfterMs : {}),
          ...(code === 502 || (operation.operationId === 'downloadVideoContent' && code === 409) || (operation.operationId === 'createChatCompletion' && code === 429) ? shouldRetry : {}),
          ...(operation.operationId === 'downloadVideoContent' && (code === 200 || code === 206) ? clipHeaders : {}),
          ...(operation.operationId === 'downloadVideoContent' && (code === 206 || code === 416) ? contentRange : {}),
        };
      }
    }
  }
  return document;
}
