import { DecoratorHandler, type Dispatcher } from 'undici';
import { ClientDisconnect } from './client-disconnect.ts';

// Tells a streamed call's signal when its request went out: handed to a connected socket, the
// moment whole-answer.ts notes for answers read whole. undici's request(), which streams use
// for the body it hands over as a Readable, says nothing of that moment, so an interceptor on
// the streams' dispatcher marks it. A caller who leaves after it, before the stream's head came
// back, is charged the prompt, which the provider has read (one that sends its head only once
// it has, say), as a non-streamed call is.

class RequestSentNotice extends DecoratorHandler {
  constructor(
    handler: Dispatcher.DispatchHandler,
    private readonly signal: ClientDisconnect,
  ) {
    super(handler);
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.signal.requestSent = true;
    // Declared on DecoratorHandler, not in its types.
    (DecoratorHandler.prototype as Dispatcher.DispatchHandler).onRequestStart!.call(this, controller, context);
  }
}

/** For `pool.compose()`: requests sent with a ClientDisconnect as their signal mark it sent. */
export const noteRequestSent: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) => {
  const { signal } = options as { signal?: unknown };
  return dispatch(options, signal instanceof ClientDisconnect ? new RequestSentNotice(handler, signal) : handler);
};
