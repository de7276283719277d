import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { GatewayError } from '../../../core/errors.ts';
import type { CallsInFlight } from './calls-in-flight.ts';

const clientGone = () => new Error('the client disconnected');

/** Fires 'abort' once when the caller goes away before its response was completely written,
 * or when the gateway interrupts the call (a shutdown past its grace, calls-in-flight.ts).
 * Passed as undici's `signal` (which takes an EventEmitter as well as an AbortSignal), either
 * cancels the upstream call too. An EventEmitter rather than an AbortController: every proxied
 * call needs one, and on Node 20 an AbortController costs about 4 µs to make against 0.1 µs, a
 * few percent of the proxy's whole CPU time per call. */
export class ClientDisconnect extends EventEmitter {
  aborted = false;
  reason: Error | undefined;
  /** performance.now() when the call's request went out to the model provider (handed to a
   * connected socket: whole-answer.ts, and request-sent.ts for streams); unset before, and
   * again while an attempt the provider never worked on waits to be sent again. */
  sentAt: number | undefined = undefined;
  /** Set when the gateway itself cut the call short: the caller is still there, and is
   * answered with this error (a JSON error, or the last event of a stream). */
  interruption: GatewayError | undefined;

  /** Without a response, only its owner (a carried call, carried-call.ts) or the gateway
   * aborts it. */
  constructor(response?: ServerResponse, calls?: CallsInFlight) {
    super();
    if (!response) return;
    // The caller may have left while a hook awaited (an idempotency claim): 'close' has fired.
    if (response.destroyed) {
      this.abort(clientGone());
      return;
    }
    response.once('close', () => {
      calls?.delete(this);
      if (response.writableFinished || this.aborted) return;
      this.abort(clientGone());
    });
    // Last: a call that starts after the grace is interrupted at once.
    calls?.add(this);
  }

  /** What the call ends with once aborted: the interruption, or the caller's leaving. */
  get abortReason(): Error {
    return this.reason ?? clientGone();
  }

  /** The request is with the provider: a caller who leaves now is charged the prompt, which
   * the provider bills whether or not it finishes the answer. */
  get requestSent(): boolean {
    return this.sentAt !== undefined;
  }

  markSent(): void {
    this.sentAt = performance.now();
  }

  /** The attempt that went out was never worked on (its connection dropped at once); the
   * request goes out again (upstream-client.ts). */
  markUnsent(): void {
    this.sentAt = undefined;
  }

  /** The caller left; nobody is there to answer. */
  get callerGone(): boolean {
    return this.aborted && this.interruption === undefined;
  }

  /** Ends the call on the gateway's side: the upstream request is cancelled and the caller is
   * answered with `error`. Nothing happens once the call was aborted for either reason. */
  interrupt(error: GatewayError): void {
    if (this.aborted) return;
    this.interruption = error;
    this.abort(error);
  }

  /** Ends the call for `reason`, as its caller's leaving does. */
  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort', reason);
  }
}

/** Resolves once the response can take more data, or the call was aborted (`gone` fired):
 * true; false when neither came within `withinMs` (the caller stopped reading). */
export function drained(response: ServerResponse, gone: ClientDisconnect, withinMs: number): Promise<boolean> {
  if (gone.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const settle = (took: boolean) => {
      clearTimeout(timer);
      response.off('drain', onMore);
      gone.off('abort', onMore);
      resolve(took);
    };
    const onMore = () => settle(true);
    // unref: a wait left pending must not keep a closing process alive.
    const timer = setTimeout(settle, withinMs, false).unref();
    response.once('drain', onMore);
    gone.once('abort', onMore);
  });
}

/** `request`, or the signal's reason as soon as it fires: undici keeps a request that waits for a
 * connection until it has one (or the connect timeout), and the caller would wait as long. An
 * answer that comes after all has its body destroyed, so its connection is not left half read. */
export function untilAborted<T extends { body: { destroy(): unknown } }>(request: Promise<T>, signal: ClientDisconnect): Promise<T> {
  if (signal.aborted) {
    request.then((late) => late.body.destroy(), () => undefined);
    return Promise.reject(signal.abortReason);
  }
  return new Promise((resolve, reject) => {
    let aborted = false;
    const onAbort = (reason: Error) => {
      aborted = true;
      reject(reason);
    };
    signal.once('abort', onAbort);
    request.then(
      (response) => {
        signal.off('abort', onAbort);
        if (aborted) response.body.destroy();
        else resolve(response);
      },
      (error: unknown) => {
        signal.off('abort', onAbort);
        reject(error);
      },
    );
  });
}
