import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import type { ConsoleContext } from '../context.ts';
import { parseForm, rateLimitsForm } from '../forms.ts';
import type { AccountForms } from './operator.ts';

// The operator's rate-limit forms on an account's page: the account's overrides, and each
// key's own. They go through the same settings service as PUT /admin/.../rate-limits, and
// answer like the page's other forms: a redirect with a notice, or the page again with the
// refused field marked. Registered inside operator.ts, so its sign-in guard applies.

type RenderAccount = (request: FastifyRequest, reply: FastifyReply, accountId: string, forms?: AccountForms, status?: number) => Promise<FastifyReply>;

export async function operatorLimitRoutes(app: FastifyInstance, { context, renderAccount }: { context: ConsoleContext; renderAccount: RenderAccount }): Promise<void> {
  const { rateLimits, apiKeys } = context;

  app.post('/accounts/:accountId/rate-limits', async (request, reply) => {
    const { accountId } = request.params as { accountId: string };
    const form = parseForm(rateLimitsForm, request.body);
    if (!form.ok) return renderAccount(request, reply, accountId, { limitsState: form }, 400);
    if (!(await rateLimits.setForAccount(accountId, form.data))) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    request.log.info({ account_id: accountId, limits: form.data }, 'account rate limits set in the console');
    return reply.redirect(`/console/operator/accounts/${accountId}?notice=limits_saved#rate-limits`, 303);
  });

  app.post('/accounts/:accountId/keys/:keyId/rate-limits', async (request, reply) => {
    const { accountId, keyId } = request.params as { accountId: string; keyId: string };
    // The key must belong to the account in the address, so a form cannot reach another's key.
    const key = (await apiKeys.listForAccount(accountId)).find((candidate) => candidate._id === keyId);
    if (!key) throw new GatewayError('resource_not_found', `There is no key '${keyId}' in account '${accountId}'.`);
    const form = parseForm(rateLimitsForm, request.body);
    if (!form.ok) return renderAccount(request, reply, accountId, { keyLimitsState: { keyId, state: form } }, 400);
    await rateLimits.setForKey(keyId, form.data);
    request.log.info({ account_id: accountId, key_id: keyId, limits: form.data }, 'key rate limits set in the console');
    return reply.redirect(`/console/operator/accounts/${accountId}?notice=limits_saved`, 303);
  });
}
