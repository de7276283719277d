import { setTimeout as sleep } from 'node:timers/promises';
import { Pool, type Dispatcher } from 'undici';
import type { Catalog } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import { untilAborted, type ClientDisconnect } from './client-disconnect.ts';
import { noteRequestSent } from './request-sent.ts';
import { malformedUpstreamAnswer, upstreamRefusal } from './upstream-errors.ts';
import { AnswerBrokeOff, AnswerTooLarge, readWholeAnswer, type WholeAnswer } from './whole-answer.ts';

// One keep-alive connection pool per OpenAI-compatible upstream, shared by every request, so a
// call reuses a warm socket instead of paying a TCP (and TLS) handshake each time.
//
// Retries are for requests the upstream cannot have worked on: no connection could be made (or
// it failed while being set up, TLS included), or it failed right after the request went out,
// as when a keep-alive socket the upstream had just closed was reused. A request whose
// connection drops later, before any answer, may have been worked on (a long completion cut by
// a load balancer's idle timeout; a stream's prompt read by a provider that sends its head only
// then): repeating it would pay the provider again and keep the caller waiting as long again,
// so it is a 502.
// Anything the upstream did answer, even a 5xx, goes back to the caller, who decides (spec 7
// rule 3).

/** The request never reached the upstream. */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);
/** The connection failed after it was made; retried only when that came at once. */
const DROPPED_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);
/** A drop within this long of the request going out on a connected socket is the keep-alive
 * race (a round trip), not a dropped generation. */
const QUICK_DROP_MS = 1_000;

export interface UpstreamClientOptions {
  /** Extra attempts after a connection failure. */
  retries?: number;
  /** Pause before retry n (1-based) is retryDelayMs × n. */
  retryDelayMs?: number;
  /** Longest wait for the response headers: a non-streamed completion arrives whole. */
  headersTimeoutMs?: number;
  /** Longest silence between two pieces of the body (stream chunks). */
  bodyTimeoutMs?: number;
  /** Largest answer read whole (a completion, images); a larger one is a 502. */
  maxAnswerBytes?: number;
}

/** Ten 1536×1024 images as base64 PNGs fit several times over. */
const MAX_ANSWER_BYTES = 128 * 1024 * 1024;

interface UpstreamConnection {
  pool: Pool;
  /** The pool for streams: their requests tell their signal when they went out. */
  streams: Dispatcher;
  basePath: string;
  apiKey: string;
}

export type UpstreamResponse = Dispatcher.ResponseData;

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function connectionErrorCode(error: unknown): string | undefined {
  return errorCode(error) ?? errorCode((error as { cause?: unknown } | null)?.cause);
}

/** A network failure, for the caller: its error code alone. The message would name the
 * upstream's address ("connect ECONNREFUSED 10.0.0.7:443"), which is the gateway's internals. */
function describe(error: unknown): string {
  return connectionErrorCode(error) ?? 'a network error';
}

export class OpenAiUpstreams {
  private readonly connections = new Map<string, UpstreamConnection>();
  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly headersTimeoutMs: number;
  /** How long an answer's body may go without a byte before the call ends. */
  readonly bodyTimeoutMs: number;
  private readonly maxAnswerBytes: number;

  constructor(
    private readonly catalog: Catalog,
    options: UpstreamClientOptions = {},
  ) {
    this.retries = options.retries ?? 2;
    this.retryDelayMs = options.retryDelayMs ?? 50;
    this.headersTimeoutMs = options.headersTimeoutMs ?? 600_000;
    this.bodyTimeoutMs = options.bodyTimeoutMs ?? 300_000;
    this.maxAnswerBytes = options.maxAnswerBytes ?? MAX_ANSWER_BYTES;
  }

  /** POSTs `payload` (JSON text) to `path` under the upstream's base URL and resolves with the
   * answer's head, its body left to stream (a streamed completion). Resolves with any HTTP
   * answer; throws a GatewayError (503) when the upstream cannot be reached, and the abort
   * reason when `signal` fires first. */
  async postJson(upstreamName: string, path: string, payload: string, options: { signal: ClientDisconnect; accept: string }): Promise<UpstreamResponse> {
    const { streams, request } = this.prepare(upstreamName, path, payload, options.accept);
    return this.withRetries(options.signal, () => untilAborted(streams.request({ ...request, signal: options.signal }), options.signal));
  }

  /** As postJson, for a JSON answer read whole (a completion, images): resolves with its text
   * and its parsed value. A non-2xx answer throws its refusal (upstream-errors.ts), a body that
   * is not JSON throws malformedUpstreamAnswer(`what`). */
  async postForJson(upstreamName: string, path: string, payload: string, options: { signal: ClientDisconnect; what: string }): Promise<{ text: string; json: unknown }> {
    const answer = await this.postJsonWhole(upstreamName, path, payload, { signal: options.signal, accept: 'application/json' });
    if (answer.statusCode < 200 || answer.statusCode >= 300) throw upstreamRefusal(answer, upstreamName);
    // A byte order mark before the JSON is dropped, as fetch's json() (which the OpenAI clients
    // read with) drops it: left in, JSON.parse refused an answer the provider had made, and
    // charged the operator for, and the caller got a 502 and retried into paying again.
    const text = answer.text.charCodeAt(0) === 0xfeff ? answer.text.slice(1) : answer.text;
    try {
      return { text, json: JSON.parse(text) };
    } catch {
      throw malformedUpstreamAnswer(options.what);
    }
  }

  /** As postJson, with the whole body read. An answer that breaks off after its head, or grows
   * past maxAnswerBytes, is a GatewayError (502) and is not repeated. */
  private async postJsonWhole(upstreamName: string, path: string, payload: string, options: { signal: ClientDisconnect; accept: string }): Promise<WholeAnswer> {
    const { pool, request } = this.prepare(upstreamName, path, payload, options.accept);
    try {
      return await this.withRetries(options.signal, () => readWholeAnswer(pool, request, options.signal, this.maxAnswerBytes));
    } catch (error) {
      if (error instanceof AnswerTooLarge) {
        // The same request asks for the same answer again, and the provider charges the
        // operator for each one it makes: the OpenAI SDKs' two retries of a 502 would triple it.
        throw new GatewayError('upstream_error', `The model provider's answer was larger than ${error.maxBytes / 1_048_576} MiB and was cut off; nothing was charged. Ask for less (fewer or smaller images, or urls instead of b64_json).`, undefined, { 'x-should-retry': 'false' });
      }
      if (!(error instanceof AnswerBrokeOff)) throw error;
      throw new GatewayError('upstream_error', `The model provider's answer broke off (${describe(error.cause)}); nothing was charged. Retry later.`);
    }
  }

  private prepare(upstreamName: string, path: string, payload: string, accept: string): { pool: Pool; streams: Dispatcher; request: Dispatcher.DispatchOptions } {
    const connection = this.connection(upstreamName);
    const request: Dispatcher.DispatchOptions = {
      method: 'POST',
      path: `${connection.basePath}${path}`,
      headers: { authorization: `Bearer ${connection.apiKey}`, 'content-type': 'application/json', accept },
      body: payload,
      headersTimeout: this.headersTimeoutMs,
      bodyTimeout: this.bodyTimeoutMs,
    };
    return { pool: connection.pool, streams: connection.streams, request };
  }

  /** Repeats `send` after connection failures (see the top of this file); translates what is
   * left into the gateway's errors, except the abort reason and AnswerBrokeOff. */
  private async withRetries<T>(signal: ClientDisconnect, send: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await send();
      } catch (error) {
        // Once aborted, the reason is the answer (a gateway interruption is a 503), not
        // whatever the request failed with meanwhile (a connect timeout, say).
        if (signal.aborted) throw signal.abortReason;
        if (error instanceof AnswerBrokeOff) throw error;
        const code = connectionErrorCode(error);
        // Since this attempt went out; unset while it never had a connection.
        const waitedMs = signal.sentAt === undefined ? 0 : performance.now() - signal.sentAt;
        const neverWorkedOn = code !== undefined && (CONNECT_CODES.has(code) || (DROPPED_CODES.has(code) && waitedMs < QUICK_DROP_MS));
        if (neverWorkedOn && attempt < this.retries) {
          // Never worked on: the provider did not read this prompt, whatever the attempt said
          // when its request went out. A caller who leaves before the next one goes out pays nothing.
          signal.markUnsent();
          await sleep(this.retryDelayMs * (attempt + 1));
          if (signal.aborted) throw signal.abortReason;
          continue;
        }
        if (code !== undefined && DROPPED_CODES.has(code) && !neverWorkedOn) {
          throw new GatewayError('upstream_error', `The model provider dropped the connection after ${(waitedMs / 1000).toFixed(1)} s without answering (${describe(error)}); nothing was charged. Retry later.`);
        }
        if (code === 'UND_ERR_HEADERS_TIMEOUT') {
          throw new GatewayError('upstream_error', `The model provider did not answer within ${this.headersTimeoutMs / 1000} s; nothing was charged. Retry later.`);
        }
        throw new GatewayError(
          'service_unavailable',
          `The model provider is unreachable right now (${describe(error)}); nothing was charged. Retry with backoff.`,
        );
      }
    }
  }

  async close(): Promise<void> {
    const pools = [...this.connections.values()].map((connection) => connection.pool);
    this.connections.clear();
    await Promise.allSettled(pools.map((pool) => pool.close()));
  }

  private connection(upstreamName: string): UpstreamConnection {
    const existing = this.connections.get(upstreamName);
    if (existing) return existing;
    const upstream = this.catalog.upstream(upstreamName);
    if (upstream.protocol !== 'openai') throw new Error(`upstream ${upstreamName} does not speak the OpenAI protocol`);
    const url = new URL(upstream.base_url);
    const pool = new Pool(url.origin, { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 120_000 });
    const connection: UpstreamConnection = {
      pool,
      streams: pool.compose(noteRequestSent),
      basePath: url.pathname.replace(/\/+$/, ''),
      apiKey: upstream.api_key,
    };
    this.connections.set(upstreamName, connection);
    return connection;
  }
}
