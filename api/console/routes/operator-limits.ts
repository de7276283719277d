import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import { configuredLimits } from '../../services/rate-limits/limit-settings.ts';
import { sendPage, type ConsoleContext } from '../context.ts';
import { keyModelsForm, parseForm, rateLimitsForm, tickedModels } from '../forms.ts';
import type { FormState } from '../views/fields.ts';
import { keyLimitsPage } from '../views/key-limits.ts';
import { revokeConfirmPage } from '../views/keys.ts';
import type { AccountForms } from './operator.ts';

// The operator's rate-limit forms: the account's overrides (on the account's page) and each
// key's own (on a page per key, with the key's models); and deleting a key. They go through the same settings service as
// PUT /admin/.../rate-limits, and answer like the console's other forms: a redirect with a
// notice, or the page again with the refused field marked. Registered inside operator.ts, so
// its sign-in guard applies.

type RenderAccount = (request: FastifyRequest, reply: FastifyReply, accountId: string, forms?: AccountForms, status?: number) => Promise<FastifyReply>;

export async function operatorLimitRoutes(app: FastifyInstance, { context, renderAccount }: { context: ConsoleContext; renderAccount: RenderAccount }): Promise<void> {
  const { rateLimits, accounts, apiKeys } = context;
  const defaults = configuredLimits(context.config);
  const models = context.catalog.all();
  const modelsForm = keyModelsForm(models.map((model) => model.id));

  app.post('/accounts/:accountId/rate-limits', async (request, reply) => {
    const { accountId } = request.params as { accountId: string };
    const form = parseForm(rateLimitsForm, request.body);
    if (!form.ok) return renderAccount(request, reply, accountId, { limitsState: form }, 400);
    if (!(await rateLimits.setForAccount(accountId, form.data))) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    request.log.info({ account_id: accountId, limits: form.data }, 'account rate limits set in the console');
    return reply.redirect(`/console/operator/accounts/${accountId}?notice=limits_saved#rate-limits`, 303);
  });

  /** The account and one of its keys; a key of another account is as unknown as a missing one,
   * so an address cannot reach a key through the wrong account. */
  async function accountKey(request: FastifyRequest) {
    const { accountId, keyId } = request.params as { accountId: string; keyId: string };
    const account = await accounts.findSettings(accountId);
    if (!account) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    const key = await apiKeys.findForAccount(keyId, accountId);
    if (!key) throw new GatewayError('resource_not_found', `There is no key '${keyId}' in account '${accountId}'.`);
    return { account, key };
  }

  function renderKey(reply: FastifyReply, found: Awaited<ReturnType<typeof accountKey>>, forms: { state?: FormState; modelsState?: { state: FormState; chosen: string[] } } = {}, status = 200) {
    return sendPage(reply, keyLimitsPage({ csrfToken: reply.generateCsrf(), ...found, defaults, models, ...forms }), status);
  }

  app.get('/accounts/:accountId/keys/:keyId/rate-limits', async (request, reply) => renderKey(reply, await accountKey(request)));

  // Deleting a key for its holder (one that leaked, say), through the same revocation as the
  // admin API and the holder's own keys page. A key deleted already is simply reported so.
  app.get('/accounts/:accountId/keys/:keyId/revoke', async (request, reply) => {
    const { account, key } = await accountKey(request);
    const accountHref = `/console/operator/accounts/${account._id}`;
    if (key.revoked_at) return reply.redirect(`${accountHref}?notice=key_revoked#keys`, 303);
    return sendPage(reply, revokeConfirmPage({ area: 'operator', csrfToken: reply.generateCsrf() }, key, { action: `${accountHref}/keys/${key._id}/revoke`, cancel: `${accountHref}#keys` }));
  });

  app.post('/accounts/:accountId/keys/:keyId/revoke', async (request, reply) => {
    const { account, key } = await accountKey(request);
    await apiKeys.revoke(key._id);
    request.log.info({ account_id: account._id, key_id: key._id }, 'key revoked by an operator in the console');
    return reply.redirect(`/console/operator/accounts/${account._id}?notice=key_revoked#keys`, 303);
  });

  app.post('/accounts/:accountId/keys/:keyId/rate-limits', async (request, reply) => {
    const found = await accountKey(request);
    const form = parseForm(rateLimitsForm, request.body);
    if (!form.ok) return renderKey(reply, found, { state: form }, 400);
    if ((await rateLimits.setForKey(found.key._id, form.data)) !== 'set') return reply.redirect(`/console/operator/accounts/${found.account._id}?notice=key_gone_limits#keys`, 303);
    request.log.info({ account_id: found.account._id, key_id: found.key._id, limits: form.data }, 'key rate limits set in the console');
    return reply.redirect(`/console/operator/accounts/${found.account._id}?notice=limits_saved#keys`, 303);
  });

  // The same change as PUT /admin/keys/{id}/models and the holder's Models page.
  app.post('/accounts/:accountId/keys/:keyId/models', async (request, reply) => {
    const found = await accountKey(request);
    const accountHref = `/console/operator/accounts/${found.account._id}`;
    if (found.key.revoked_at) return reply.redirect(`${accountHref}?notice=key_gone#keys`, 303);
    const form = parseForm(modelsForm, request.body);
    if (!form.ok) {
      return renderKey(reply, found, { modelsState: { state: form, chosen: tickedModels(request.body) } }, 400);
    }
    const chosen = form.data.models.length > 0 ? form.data.models : null;
    await apiKeys.setModels(found.key._id, chosen);
    request.log.info({ account_id: found.account._id, key_id: found.key._id, models: chosen }, 'key models set by an operator in the console');
    return reply.redirect(`${accountHref}?notice=${chosen ? 'key_models_saved' : 'key_every_model'}#keys`, 303);
  });
}
