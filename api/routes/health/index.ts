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

/** 'ok', or why the check failed (for the log: a driver's words name hosts and ports). */
async function probe(check: () => Promise<void>): Promise<{ ok: true } | { ok: false; why: string }> {
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
    return { ok: true };
  } catch (error) {
    return { ok: false, why: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}

// The probe is open to anyone on the api's port, so it says which dependency is down and no
// more; the reason (hosts, ports, driver errors) goes to the log.
const checkResults = z.object({
  database: z.enum(['ok', 'unavailable']).describe('Whether the store answered'),
  temporal: z.enum(['ok', 'unavailable']).describe('Whether Temporal answered'),
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

  app.get('/readyz', { schema: readinessSchema }, async (request, reply) => {
    const [database, temporal] = await Promise.all([probe(checks.database), probe(checks.temporal)]);
    const results = { database: database.ok ? ('ok' as const) : ('unavailable' as const), temporal: temporal.ok ? ('ok' as const) : ('unavailable' as const) };
    if (!database.ok || !temporal.ok) {
      request.log.warn({ database: database.ok ? 'ok' : database.why, temporal: temporal.ok ? 'ok' : temporal.why }, 'not ready');
      const error = new GatewayError('service_unavailable', `Not ready: the store is ${results.database}, Temporal is ${results.temporal}.`);
      return reply.status(503).send({ ...error.toBody(), checks: results });
    }
    return { status: 'ready' as const, checks: results };
  });
};
