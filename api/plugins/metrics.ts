import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import { GatewayError } from '../../core/errors.ts';
import { enableProcessMetrics, httpRequestDuration, metricsRegistry } from '../../core/metrics.ts';
import { bearerMatches } from '../../core/secret-match.ts';
import { errorResponses } from '../openapi/error-responses.ts';
import { metricsTokenSecurity } from '../openapi/security.ts';
import { soleAuthorization } from './authorization-header.ts';
import { FailuresByAddress, OPERATOR_TOKEN_GUESSES, tooManyWrongTokens } from '../../core/failures-by-address.ts';

// GET /metrics in the Prometheus text format, and the request duration histogram behind it.
// Open like /healthz unless METRICS_TOKEN is set (then a scraper sends it as a bearer token):
// the figures are totals, never per key or account, but spend per model is the operator's
// business, and in a deployment the api's port is the public one. Requests nobody routed are counted under
// the route "unmatched", so probes of random URLs cannot blow up the label set.

const metricsSchema = {
  tags: ['operations'],
  operationId: 'metrics',
  summary: 'Prometheus metrics of this api process',
  security: metricsTokenSecurity,
  response: {
    200: {
      description: 'The Prometheus text exposition format.',
      content: { 'text/plain': { schema: z.string() } },
    },
    ...errorResponses(401, 429),
  },
};

async function metricsPlugin(app: FastifyInstance, options: { token?: string | undefined }): Promise<void> {
  enableProcessMetrics();
  const wrongTokens = new FailuresByAddress(OPERATOR_TOKEN_GUESSES);

  app.addHook('onResponse', (request, reply, done) => {
    httpRequestDuration.observe(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });

  app.get('/metrics', { schema: metricsSchema }, async (request, reply) => {
    if (options.token !== undefined) {
      const authorization = soleAuthorization(request);
      // No token guesses nothing, and is not counted (admin-auth.ts).
      const waitSeconds = authorization === undefined ? 0 : wrongTokens.admit(request.ip);
      if (waitSeconds > 0) throw tooManyWrongTokens('metrics', waitSeconds);
      if (!bearerMatches(authorization, options.token)) {
        throw new GatewayError('invalid_metrics_token', 'Missing or invalid metrics token (Authorization: Bearer <METRICS_TOKEN>).', undefined, { 'www-authenticate': 'Bearer' });
      }
      wrongTokens.forgive(request.ip);
    }
    const text = await metricsRegistry.metrics();
    return reply.type(metricsRegistry.contentType).send(text);
  });
}

export const metrics = fp(metricsPlugin, { name: 'metrics' });
