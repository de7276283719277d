import type { FastifyError, FastifyInstance } from 'fastify';
import { loggedUrl } from '../plugins/request-log.ts';
import { toGatewayError } from '../plugins/error-handler.ts';
import { sendPage } from './context.ts';
import { errorPage } from './views/error-page.ts';

// Console requests fail as HTML pages a person can act on; the JSON error bodies of the API
// (spec section 7) stay on /v1 and /admin. The mapping to a status reuses the API's error
// registry, so a code means the same thing in both places.

const CSRF_CODES = new Set(['FST_CSRF_MISSING_SECRET', 'FST_CSRF_INVALID_TOKEN']);

export function registerConsoleErrorPages(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error.code && CSRF_CODES.has(error.code)) {
      request.log.warn({ code: error.code, url: loggedUrl(request.url) }, 'console form refused: CSRF token missing or wrong');
      return sendPage(
        reply,
        errorPage({
          status: 403,
          title: 'This form has expired',
          message: 'The form was not sent from a current console page (or your browser refused its cookie). Go back, reload the page and send it again.',
        }),
        403,
      );
    }
    const gatewayError = toGatewayError(error, app.initialConfig.bodyLimit ?? 0);
    if (gatewayError.status >= 500) {
      request.log.error({ err: error }, 'console request failed');
      return sendPage(
        reply,
        errorPage({ status: gatewayError.status, title: 'Something went wrong', message: 'The console could not complete this request. Try again in a moment.', requestId: request.id }),
        gatewayError.status,
      );
    }
    const title = gatewayError.status === 404 ? 'Not found' : 'Request refused';
    // What the error says beside its message: Retry-After on a 429, Content-Range on a clip's 416.
    reply.headers(gatewayError.headers);
    return sendPage(reply, errorPage({ status: gatewayError.status, title, message: gatewayError.message }), gatewayError.status);
  });

  app.setNotFoundHandler((_request, reply) => {
    return sendPage(reply, errorPage({ status: 404, title: 'Not found', message: 'There is no console page at this address.' }), 404);
  });
}
