import { request, type Dispatcher } from 'undici';
import { ForbiddenDestinationError, validateCallerUrl } from '../core/outbound-guard.ts';
import { signWebhook } from '../core/webhook-signature.ts';
import { parseRetryAfter } from '../core/retry-after.ts';
import { DEFAULT_WEBHOOK_TIMEOUT_MS } from '../core/config.ts';

// One webhook delivery attempt. There is no retry loop here on purpose: the workflow owns the
// schedule on durable timers, so a worker restart between attempts loses nothing. This function
// never throws for anything the receiver does; it classifies the attempt instead.

export interface WebhookDeliveryInput {
  url: string;
  webhookId: string;
  /** Unix seconds; part of the signed content. */
  timestamp: number;
  /** Sent byte-for-byte; the signature covers exactly this string. */
  body: string;
  /** Every active secret; during a rotation each gets its own signature. */
  secrets: readonly string[];
  /** The guarded dispatcher (see core/outbound-guard.ts). */
  dispatcher: Dispatcher;
  timeoutMs?: number;
}

export interface WebhookDeliveryResult {
  /** delivered: 2xx. retry: try again later. gone: 410, stop. refused: the destination is not allowed, stop. */
  outcome: 'delivered' | 'retry' | 'gone' | 'refused';
  status?: number;
  error?: string;
  /** For the operator's log, beside `error`: what the caller may not read (the address a
   * refused name resolved to, how to allow it). */
  detail?: string;
  retryAfterMs?: number;
  durationMs: number;
}

const USER_AGENT = 'Framegate-Webhooks/1';
// What we read of a response before dropping it: enough to keep the connection reusable for
// ordinary answers, without letting a receiver stream into our memory.
const RESPONSE_DRAIN_LIMIT_BYTES = 64 * 1024;

function findForbidden(error: unknown): ForbiddenDestinationError | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof ForbiddenDestinationError) return current;
  }
  return undefined;
}

function describeFailure(error: unknown, timeoutMs: number, signal: AbortSignal): string {
  if (signal.aborted) return `no answer within ${timeoutMs} ms (timeout)`;
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return `${error.message} (timeout after ${timeoutMs} ms)`;
  }
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${typeof code === 'string' ? `${code} ` : ''}${error.message}${cause}`;
}

export async function deliverWebhookOnce(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const timeoutMs = input.timeoutMs ?? DEFAULT_WEBHOOK_TIMEOUT_MS;
  const startedAt = performance.now();
  const elapsed = () => Math.round(performance.now() - startedAt);

  // A URL that can never work (bad scheme, credentials) would fail the same way on every retry.
  const checked = validateCallerUrl(input.url);
  if (typeof checked === 'string') return { outcome: 'refused', error: `invalid callback URL: ${checked}`, durationMs: elapsed() };

  // Signing errors (a malformed secret) are ours, not the receiver's: they throw.
  const signatureHeaders = signWebhook({ secret: input.secrets, webhookId: input.webhookId, timestamp: input.timestamp, body: input.body });
  const signal = AbortSignal.timeout(timeoutMs);
  let response: Dispatcher.ResponseData;
  try {
    response = await request(checked, {
      method: 'POST',
      dispatcher: input.dispatcher,
      headers: {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        ...signatureHeaders,
      },
      body: input.body,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  } catch (error) {
    const forbidden = findForbidden(error);
    if (forbidden) return { outcome: 'refused', error: forbidden.publicMessage, detail: forbidden.message, durationMs: elapsed() };
    return { outcome: 'retry', error: describeFailure(error, timeoutMs, signal), durationMs: elapsed() };
  }

  // The answer is the status; the body only needs draining (or dropping) so the socket is freed.
  await response.body.dump({ limit: RESPONSE_DRAIN_LIMIT_BYTES, signal }).catch(() => response.body.destroy());
  const status = response.statusCode;
  const durationMs = elapsed();
  if (status >= 200 && status < 300) return { outcome: 'delivered', status, durationMs };
  if (status === 410) return { outcome: 'gone', status, error: 'receiver answered 410 Gone: no further attempts', durationMs };

  const result: WebhookDeliveryResult = { outcome: 'retry', status, durationMs };
  if (status >= 300 && status < 400) {
    const location = response.headers.location;
    const target = Array.isArray(location) ? location[0] : location;
    result.error = `receiver answered a ${status} redirect${target ? ` to ${target}` : ''}; redirects are not followed, use the final URL as callback_url`;
  } else {
    result.error = `receiver answered HTTP ${status}`;
  }
  const retryAfterMs = parseRetryAfter(response.headers['retry-after']);
  if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
  return result;
}
