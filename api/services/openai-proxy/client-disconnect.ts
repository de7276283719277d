import type { ServerResponse } from 'node:http';

/** A signal that fires when the caller goes away before its response was completely written.
 * Passed to the upstream request, it makes a disconnect cancel the upstream call too. */
export function abortOnDisconnect(response: ServerResponse): AbortSignal {
  const controller = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) controller.abort(new Error('the client disconnected'));
  });
  return controller.signal;
}

/** Resolves once the response can take more data, or the caller is gone (`gone` fired). */
export function drained(response: ServerResponse, gone: AbortSignal): Promise<void> {
  if (gone.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      gone.removeEventListener('abort', done);
      resolve();
    };
    response.once('drain', done);
    gone.addEventListener('abort', done, { once: true });
  });
}
