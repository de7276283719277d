import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { GatewayError } from '../../../core/errors.ts';
import { errorObjectFor } from '../../openapi/error-responses.ts';
import { openAccess } from '../../openapi/security.ts';

export interface ReadinessChecks {
  database(): Promise<void>;
  temporal(): Promise<void>;
}

const READINESS_TIMEOUT_MS = 2_000;

async function probe(check: () => Promise<void>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const checking = check();
    // A check that loses the race may still reject later (e.g. when its channel closes).
    checking.catch(() => undefined);
    await Promise.race([
      checking,
      new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${READINESS_TIMEOUT_MS} ms`)), READINESS_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch (error) {
    return `unavailable: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    clearTimeout(timer);
  }
}

const checkResults = z.object({
  database: z.string().describe('ok, or why the store did not answer'),
  temporal: z.string().describe('ok, or why Temporal did not answer'),
});

const livenessSchema = {
  tags: ['operations'],
  operationId: 'liveness',
  summary: 'Liveness: the process answers',
  security: openAccess,
  response: { 200: z.object({ status: z.literal('ok') }) },
};

const readinessSchema = {
  tags: ['operations'],
  operationId: 'readiness',
  summary: 'Readiness: the store and Temporal answer',
  security: openAccess,
  response: {
    200: z.object({ status: z.literal('ready'), checks: checkResults }),
    503: z.object({ error: errorObjectFor(503), checks: checkResults }).describe('Not ready; `checks` says which dependency is down.'),
  },
};

export const healthRoutes: FastifyPluginAsyncZod<{ checks: ReadinessChecks }> = async (app, { checks }) => {
  app.get('/healthz', { schema: livenessSchema }, async () => ({ status: 'ok' as const }));

  app.get('/readyz', { schema: readinessSchema }, async (_request, reply) => {
    const [database, temporal] = await Promise.all([probe(checks.database), probe(checks.temporal)]);
    if (database !== 'ok' || temporal !== 'ok') {
      const error = new GatewayError('service_unavailable', `Not ready: database ${database}; temporal ${temporal}.`);
      return reply.status(503).send({ ...error.toBody(), checks: { database, temporal } });
    }
    return { status: 'ready' as const, checks: { database, temporal } };
  });
};
