import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { GatewayError } from '../../../core/errors.ts';
import { microsToUsd } from '../../../core/money.ts';
import type { AccountStore } from '../../../store/accounts.ts';
import { addUsage, ZERO_USAGE, type UsageReports, type UsageTotals } from '../../../store/usage-reports.ts';
import { AUTHENTICATED_ERRORS, errorResponses } from '../../openapi/error-responses.ts';
import { adminTokenSecurity } from '../../openapi/security.ts';
import { accountIdParams } from './schemas.ts';

// GET /admin/accounts/{id}/usage: an account's usage and spend per key and per UTC day, as the
// console's usage page shows its holder (store/usage-reports.ts), for an operator's scripts.
// Calls count on the day their charge was recorded (a spend lease settles seconds after them).

// A calendar day: zod's pattern knows month lengths and leap years (2025-02-31 is a 400), and the
// document states it, so generated requests keep to real days. A range whose `from` is after
// its `to` is empty, not an error.
const utcDay = z.iso.date({ error: (issue) => (Array.isArray(issue.input) ? 'must be given once, as a date like 2025-01-31' : 'must be a date like 2025-01-31') });

// Strict: a misspelt day (`?since=`) would otherwise answer every day without a word.
const usageQuery = z.strictObject({
  from: utcDay.optional().describe('First UTC day, inclusive; all days before `to` when left out.'),
  to: utcDay.optional().describe('Last UTC day, inclusive; all days from `from` when left out.'),
});

const usageFigures = {
  requests: z.number().int(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  video_seconds: z.number(),
  images: z.number().int(),
  spend_usd: z.number(),
};

const usageView = z.object({
  account_id: z.string(),
  from: z.string().nullable(),
  to: z.string().nullable(),
  totals: z.object(usageFigures),
  keys: z.array(z.object({ key_id: z.string(), ...usageFigures })).describe('Keys with usage in the range, by id.'),
  days: z.array(z.object({ day: z.string(), ...usageFigures })).describe('Days with usage in the range, in order.'),
});

function figures(totals: UsageTotals) {
  const { spend_micros, ...counts } = totals;
  return { ...counts, spend_usd: microsToUsd(spend_micros) };
}

export interface AdminUsageRouteOptions {
  accounts: AccountStore;
  usageReports: UsageReports;
}

export const adminUsageRoutes: FastifyPluginAsyncZod<AdminUsageRouteOptions> = async (app, { accounts, usageReports }) => {
  app.addHook('onRequest', app.requireAdmin);

  const schema = {
    tags: ['admin'],
    operationId: 'getAccountUsage',
    summary: 'Read an account’s usage and spend per key and per day',
    security: adminTokenSecurity,
    params: accountIdParams,
    querystring: usageQuery,
    response: { 200: usageView, ...errorResponses(400, 404, ...AUTHENTICATED_ERRORS) },
  };

  app.get('/accounts/:id/usage', { schema }, async (request) => {
    const { id } = request.params;
    if (!(await accounts.exists(id))) throw new GatewayError('resource_not_found', `No account with id '${id}'.`);
    const { from, to } = request.query;
    const summary = await usageReports.summarise({ accountId: id, fromDay: from, toDay: to });
    const byKey = summary.byKey();
    const byDay = summary.byDay();
    return {
      account_id: id,
      from: from ?? null,
      to: to ?? null,
      totals: figures([...byDay.values()].reduce(addUsage, ZERO_USAGE)),
      keys: [...byKey].map(([keyId, usage]) => ({ key_id: keyId, ...figures(usage) })),
      days: [...byDay].map(([day, usage]) => ({ day, ...figures(usage) })),
    };
  });
};
