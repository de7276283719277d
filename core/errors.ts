// The error registry: every error the gateway returns has a code here, with its HTTP status
// and the spec's error.type. Handlers throw GatewayError; one plugin maps it to the body of
// spec section 7: {error: {message, type, code, param?}}.

export const errorCatalog = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  empty_body: { status: 400, type: 'invalid_request_error' },
  // A model provider's own codes for a request it refused, passed on as OpenAI sends them:
  // clients branch on them (shorten the conversation, show a moderation notice).
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  content_policy_violation: { status: 400, type: 'invalid_request_error' },
  unsupported_parameter: { status: 400, type: 'invalid_request_error' },
  unsupported_value: { status: 400, type: 'invalid_request_error' },
  // gpt-image-1's refusal of a prompt by its safety system.
  moderation_blocked: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  invalid_admin_token: { status: 401, type: 'authentication_error' },
  invalid_metrics_token: { status: 401, type: 'authentication_error' },
  model_not_allowed: { status: 403, type: 'permission_error' },
  insufficient_balance: { status: 403, type: 'insufficient_quota' },
  model_not_found: { status: 404, type: 'not_found_error' },
  task_not_found: { status: 404, type: 'not_found_error' },
  // The task exists and succeeded, but its clip is gone (the vendor dropped it): a client must
  // not take the task id for wrong.
  clip_not_found: { status: 404, type: 'not_found_error' },
  resource_not_found: { status: 404, type: 'not_found_error' },
  route_not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  conflict: { status: 409, type: 'conflict_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  // A Range past the end of a clip streamed through (the caller asked; the vendor said 416).
  range_not_satisfiable: { status: 416, type: 'invalid_request_error' },
  idempotency_mismatch: { status: 422, type: 'invalid_request_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error' },
  internal_error: { status: 500, type: 'server_error' },
  upstream_error: { status: 502, type: 'upstream_error' },
  service_unavailable: { status: 503, type: 'service_unavailable_error' },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof errorCatalog;

export interface ErrorBody {
  error: { message: string; type: string; code: ErrorCode; param?: string };
}

export class GatewayError extends Error {
  override readonly name = 'GatewayError';
  readonly status: number;
  readonly type: string;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = errorCatalog[code].status;
    this.type = errorCatalog[code].type;
  }

  toBody(): ErrorBody {
    const error: ErrorBody['error'] = { message: this.message, type: this.type, code: this.code };
    if (this.param !== undefined) error.param = this.param;
    return { error };
  }
}
