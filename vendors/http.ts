import { getGlobalDispatcher, interceptors, request, type Dispatcher } from 'undici';
import { z } from 'zod';
import { VendorRejectedError, VendorTransientError } from './types.ts';
import { parseRetryAfter } from '../core/retry-after.ts';
import { readUpstreamError } from '../core/upstream-error-body.ts';

// The HTTP plumbing every video adapter shares, so that one module decides what is worth
// retrying. The workflow retries VendorTransientError (after Retry-After when the vendor sent
// one) and ends the task on VendorRejectedError, so a wrong classification here either bills
// nobody for a task that could have succeeded or hammers a vendor that already said no.

export const DEFAULT_VENDOR_TIMEOUT_MS = 30_000;

export type VendorHttpMethod = 'GET' | 'HEAD' | 'POST' | 'DELETE';

export interface VendorHttpOptions {
  /** Names the vendor in error messages, e.g. "seedance". */
  vendor: string;
  baseUrl: string;
  apiKey: string;
  /** Longest wait for the response headers, and for each stretch of silence in the body. */
  timeoutMs?: number;
}

export interface VendorStream {
  /** 2xx, or 416 for a range the vendor cannot serve (its body already drained). */
  status: number;
  body: AsyncIterable<Uint8Array>;
  /** The response headers a download passes on; absent when the vendor sent none. */
  headers: { contentType?: string; contentLength?: string; contentRange?: string; acceptRanges?: string; etag?: string; lastModified?: string };
}

/** What a download asks of the vendor beyond the file: a part of it, or only its headers. */
export interface VendorStreamRequest {
  method?: 'GET' | 'HEAD';
  range?: string;
  ifRange?: string;
}

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Turns a non-2xx answer into the error the workflow's retry policy understands. */
export function classifyVendorFailure(
  vendor: string,
  statusCode: number,
  headers: Record<string, string | string[] | undefined>,
  bodyText: string,
): VendorTransientError | VendorRejectedError {
  const { code, message } = readUpstreamError(bodyText);
  const description = `${vendor} answered ${statusCode}${code ? ` ${code}` : ''}: ${message}`;
  if (statusCode === 408 || statusCode === 429 || statusCode >= 500) {
    return new VendorTransientError(description, statusCode, parseRetryAfter(headers['retry-after']));
  }
  // Everything else, including an unexpected 3xx: a redirect from a JSON API means a wrong
  // base URL, which retrying cannot fix, so it should fail loudly rather than loop.
  return new VendorRejectedError(description, statusCode, code);
}

function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? `${code}: ${error.message}` : `${error.name}: ${error.message}`;
}

/** A small client bound to one vendor connection. */
export function createVendorHttp(options: VendorHttpOptions) {
  const base = options.baseUrl.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? DEFAULT_VENDOR_TIMEOUT_MS;
  const vendor = options.vendor;

  async function readText(method: VendorHttpMethod, path: string, body: Dispatcher.ResponseData['body']): Promise<string> {
    try {
      return await body.text();
    } catch (error) {
      throw new VendorTransientError(`${vendor}: ${method} ${path} broke off while reading the body: ${describeNetworkError(error)}`);
    }
  }

  /** Sends one request; resolves only for 2xx, throws the classified error otherwise. */
  async function send(
    method: VendorHttpMethod,
    path: string,
    init: { json?: unknown; accept?: string; dispatcher?: Dispatcher; idempotencyKey?: string; headers?: Record<string, string>; passStatus?: number } = {},
  ): Promise<Dispatcher.ResponseData> {
    const headers: Record<string, string> = { ...init.headers, authorization: `Bearer ${options.apiKey}`, accept: init.accept ?? 'application/json' };
    if (init.json !== undefined) headers['content-type'] = 'application/json';
    if (init.idempotencyKey !== undefined) headers['idempotency-key'] = init.idempotencyKey;
    let response: Dispatcher.ResponseData;
    try {
      response = await request(`${base}${path}`, {
        method,
        headers,
        body: init.json === undefined ? undefined : JSON.stringify(init.json),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        dispatcher: init.dispatcher,
      });
    } catch (error) {
      // Refused, reset, DNS or timeout: the vendor never answered, so another try may work.
      throw new VendorTransientError(`${vendor}: ${method} ${path} got no answer: ${describeNetworkError(error)}`);
    }
    if ((response.statusCode >= 200 && response.statusCode < 300) || response.statusCode === init.passStatus) return response;
    const text = await readText(method, path, response.body).catch(() => '');
    throw classifyVendorFailure(vendor, response.statusCode, response.headers, text);
  }

  return {
    /** A JSON call whose 2xx body must match `schema`. */
    async json<T>(method: VendorHttpMethod, path: string, schema: z.ZodType<T>, json?: unknown, idempotencyKey?: string): Promise<T> {
      const response = await send(method, path, { json, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) });
      const text = await readText(method, path, response.body);
      // A 2xx that cannot be read is most often a proxy or load balancer page in front of the
      // vendor, not the vendor's verdict: a read is worth another try. A POST is not: the vendor
      // may have created (and will bill) a task under it, and each retry would create another.
      const unreadable = (message: string) =>
        method === 'POST'
          ? new VendorRejectedError(`${message}; not repeated, as the vendor may have created the task`, response.statusCode)
          : new VendorTransientError(message, response.statusCode);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw unreadable(`${vendor}: ${method} ${path} answered ${response.statusCode} with a body that is not JSON`);
      }
      const result = schema.safeParse(parsed);
      if (!result.success) throw unreadable(`${vendor}: ${method} ${path} answered ${response.statusCode} with an unexpected shape: ${z.prettifyError(result.error)}`);
      return result.data;
    },

    /** A call whose 2xx body does not matter (DELETE). */
    async discard(method: VendorHttpMethod, path: string): Promise<void> {
      const response = await send(method, path);
      await response.body.dump();
    },

    /** DELETE of a vendor resource; one that is already gone (404) needs no deleting. */
    async deleteUnlessGone(path: string): Promise<void> {
      try {
        await this.discard('DELETE', path);
      } catch (error) {
        if (error instanceof VendorRejectedError && error.status === 404) return;
        throw error;
      }
    },

    /** A binary download, streamed. Redirects are followed because a download endpoint may hand
     * off to storage; undici drops the Authorization header when the redirect leaves the origin. */
    async stream(path: string, ask: VendorStreamRequest = {}): Promise<VendorStream> {
      const dispatcher = getGlobalDispatcher().compose(interceptors.redirect({ maxRedirections: 3 }));
      const headers: Record<string, string> = {};
      if (ask.range !== undefined) headers.range = ask.range;
      if (ask.ifRange !== undefined) headers['if-range'] = ask.ifRange;
      // A range past the file's end is the caller's to hear about (416), not a vendor failure.
      const response = await send(ask.method ?? 'GET', path, { accept: '*/*', dispatcher, headers, passStatus: ask.range === undefined ? undefined : 416 });
      if (response.statusCode === 416) await response.body.dump();
      const pick = (name: string) => firstHeader(response.headers[name]);
      const found = {
        contentType: pick('content-type'),
        contentLength: pick('content-length'),
        contentRange: pick('content-range'),
        acceptRanges: pick('accept-ranges'),
        etag: pick('etag'),
        lastModified: pick('last-modified'),
      };
      return {
        status: response.statusCode,
        body: response.body,
        headers: Object.fromEntries(Object.entries(found).filter(([, value]) => value !== undefined)),
      };
    },
  };
}

export type VendorHttp = ReturnType<typeof createVendorHttp>;
