import type { Dispatcher } from 'undici';
import { ClientDisconnect } from './client-disconnect.ts';

// Tells a streamed call's signal when its request went out: handed to a connected socket, the
// moment whole-answer.ts notes for answers read whole. undici's request(), which streams use
// for the body it hands over as a Readable, says nothing of that moment, so an interceptor on
// the streams' dispatcher marks it. It serves the retry rule (a connection dropped at once was
// never worked on; upstream-client.ts) and the charge of a caller who leaves after it, before the
// stream's head came back: the prompt, which the provider has read (one that sends its head only
// once it has, say), as for a non-streamed call.
//
// The handler request() dispatches is wrapped on the instance, not in a handler of its own: a
// wrapper class would stand between undici and it for every chunk, and undici's
// DecoratorHandler asserts a single response head, so a 103 Early Hints before the 200 failed
// every stream (request()'s own handler ignores interim answers).

type StartHook = (this: unknown, ...args: unknown[]) => unknown;

/** request()'s handler speaks undici's older interface, whose onConnect undici calls at the
 * moment it calls a newer handler's onRequestStart; either is wrapped. */
function markSentOnStart(handler: Dispatcher.DispatchHandler, signal: ClientDisconnect): void {
  const hooks = handler as Record<'onRequestStart' | 'onConnect', StartHook | undefined>;
  const name = typeof hooks.onRequestStart === 'function' ? 'onRequestStart' : 'onConnect';
  const start = hooks[name];
  if (typeof start !== 'function') return;
  hooks[name] = function (this: unknown, ...args: unknown[]) {
    signal.markSent();
    return start.apply(this, args);
  };
}

/** For `pool.compose()`: requests sent with a ClientDisconnect as their signal mark it sent. */
export const noteRequestSent: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
  const { signal } = options as { signal?: unknown };
  if (signal instanceof ClientDisconnect) markSentOnStart(handler, signal);
  return dispatch(options, handler);
};
