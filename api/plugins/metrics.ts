import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import { enableProcessMetrics, httpRequestDuration, metricsRegistry } from '../../core/metrics.ts';
import { openAccess } from '../openapi/security.ts';

// GET /metrics in the Prometheus text format, and the request duration histogram behind it.
// Open like /healthz: scrapers rarely carry credentials; keep the port off the public internet
// (the figures are totals, never per key or account). Requests nobody routed are counted under
// the route "unmatched", so probes of random URLs cannot blow up the label set.

const metricsSchema = {
  tags: ['operations'],
  operationId: 'metrics',
  summary: 'Prometheus metrics of this api process',
  security: openAccess,
  response: {
    200: {
      description: 'The Prometheus text exposition format.',
      content: { 'text/plain': { schema: z.string() } },
    },
  },
};

async function metricsPlugin(app: FastifyInstance): Promise<void> {
  enableProcessMetrics();

  app.addHook('onResponse', (request, reply, done) => {
    httpRequestDuration.observe(
      { method: request.method, route: request.routeOptions.url ?? 'unmatched', status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });

  app.get('/metrics', { schema: metricsSchema }, async (_request, reply) => {
    const text = await metricsRegistry.metrics();
    return reply.type(metricsRegistry.contentType).send(text);
  });
}

export const metrics = fp(metricsPlugin, { name: 'metrics' });
