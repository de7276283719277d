import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

// One log line per request, when it ends, instead of Fastify's two (one on arrival, one on
// completion): at the chat proxy's request rates the second line cost about as much as the
// rest of the gateway's own work. The line carries what following a request needs: its id
// (also sent back as x-request-id and put in a video task's workflow memo), the route, the
// status, the time taken and the key that called. It is written through the root logger with
// the id as a field, as the request's own logger would write it: that logger is then never
// made for a request that logs nothing else (api/lazy-request-logger.ts).

/** The query parameters the gateway reads (task listing, usage reports, console pages): they
 * are logged. Any other is logged as `[redacted]`, name and value, as is a value that looks like
 * an API key: a client that puts its key in the URL (`?api_key=fg_…`, `?key=fg_…`, `?fg_…`)
 * would otherwise have it written to the log verbatim. */
const LOGGED_PARAMETERS = new Set(['limit', 'after', 'status', 'from', 'to', 'key', 'notice', 'expired', 'signed_out', 'page']);
const LOOKS_LIKE_A_KEY = /fg_/i;

/** `url` as the log shows it: the path, and the query with what may be secret masked. */
export function loggedUrl(url: string): string {
  const mark = url.indexOf('?');
  if (mark === -1) return url;
  const query = new URLSearchParams(url.slice(mark + 1));
  const shown = [...query].map(([name, value]) =>
    LOGGED_PARAMETERS.has(name) && !LOOKS_LIKE_A_KEY.test(value) ? `${name}=${encodeURIComponent(value)}` : LOGGED_PARAMETERS.has(name) ? `${name}=[redacted]` : '[redacted]',
  );
  return `${url.slice(0, mark)}?${shown.join('&')}`;
}

function logEnd(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, status: number, message: string): void {
  app.log.info(
    {
      reqId: request.id,
      method: request.method,
      url: loggedUrl(request.url),
      route: request.routeOptions.url,
      status,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      key: request.principal?.keyId,
    },
    message,
  );
}

/** The line of a chat or image call whose caller left before its answer ended (a stream cut
 * off, a call abandoned, an image carried on and charged): Fastify runs onResponse only when a
 * response finishes, so such a call had no line to tie its charge to a key. Status 499, as nginx
 * logs a client that closed the request. Called by the routes that see the caller go (not a hook
 * on every request: chat's hot path would pay for a listener per call). */
export function logCallerLeft(request: FastifyRequest, reply: FastifyReply): void {
  logEnd(request.server, request, reply, 499, 'request abandoned by its caller');
}

async function requestLogPlugin(app: FastifyInstance): Promise<void> {
  app.addHook('onResponse', (request, reply, done) => {
    logEnd(app, request, reply, reply.statusCode, 'request completed');
    done();
  });
}

export const requestLog = fp(requestLogPlugin, { name: 'request-log' });
