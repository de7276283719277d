import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import { accountFrame, accountIdOf } from '../account-area.ts';
import { configuredLimits, effectiveLimits } from '../../services/rate-limits/limit-settings.ts';
import { sendPage, type ConsoleContext } from '../context.ts';
import { setCreatedKeyCookie, takeCreatedKey } from '../created-key-flash.ts';
import { createKeyForm, formReference, keyModelsForm, parseForm, tickedModels } from '../forms.ts';
import { SESSION_COOKIE } from '../sessions.ts';
import { createdKeyPage, keyModelsPage, keysPage, revokeConfirmPage } from '../views/keys.ts';

// Creating, listing, restricting and deleting (revoking) API keys. Creation answers with a redirect, never
// with the key itself, so a reload cannot create a second key; the plaintext travels to the
// page that shows it once in a sealed one-time cookie (created-key-flash.ts).

// A page of keys: an account may hold thousands (1,170 made a 650 KB page in a review).
export const KEYS_PAGE_SIZE = 100;

const REVOKED_NOTICE = { kind: 'success' as const, text: 'Key deleted. Every call made with it now answers 401.' };
const MODELS_NOTICE = { kind: 'success' as const, text: 'Models saved. The key’s next call may use those models and no others (403 for the rest).' };
const KEY_GONE_NOTICE = { kind: 'warning' as const, text: 'That key is deleted: it uses no model, and its models were not changed.' };
const EVERY_MODEL_NOTICE = { kind: 'success' as const, text: 'Models saved: none ticked, so the key may use every model from its next call.' };
const ALREADY_CREATED_NOTICE = { kind: 'warning' as const, text: 'That form was sent already: its key is in the list below, and its secret was shown once, when it was made.' };

export async function keyRoutes(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  const { apiKeys, catalog, secureCookies, formClaims } = context;
  const models = catalog.all();
  const keyForm = createKeyForm(models.map((model) => model.id));
  const modelsForm = keyModelsForm(models.map((model) => model.id));

  const defaults = configuredLimits(context.config);
  /** What the limiter applies to each of the holder's keys. */
  const limitsFor = (request: FastifyRequest) => (key: ApiKeyDocument) => effectiveLimits(key.rate_limits, request.consoleAccount?.rate_limits, defaults);

  /** One of the holder's own keys; another account's key is as unknown as a missing one. */
  async function ownKey(request: FastifyRequest, keyId: string): Promise<ApiKeyDocument> {
    const key = await apiKeys.findForAccount(keyId, accountIdOf(request));
    if (!key) throw new GatewayError('resource_not_found', 'There is no such key in your account.');
    return key;
  }

  /** A page of the holder's keys, newest first, older than the key `after` when given. */
  async function keysPageOf(request: FastifyRequest, after: string | undefined) {
    const { keys, hasMore, isFirstPage } = await apiKeys.listPageForAccount(accountIdOf(request), { limit: KEYS_PAGE_SIZE, afterId: after });
    return { keys, olderAfter: hasMore ? keys[keys.length - 1]!._id : null, isFirstPage };
  }

  app.get('/keys', async (request, reply) => {
    const query = request.query as Record<string, unknown>;
    const page = await keysPageOf(request, typeof query.after === 'string' && query.after !== '' ? query.after : undefined);
    const notices = { revoked: REVOKED_NOTICE, already_created: ALREADY_CREATED_NOTICE, models: MODELS_NOTICE, every_model: EVERY_MODEL_NOTICE, key_gone: KEY_GONE_NOTICE };
    const notice = typeof query.notice === 'string' && Object.hasOwn(notices, query.notice) ? notices[query.notice as keyof typeof notices] : null;
    return sendPage(reply, keysPage(accountFrame(request, reply, 'keys'), { ...page, limitsOf: limitsFor(request), models, notice, formReference: formReference() }));
  });

  app.post('/keys', async (request, reply) => {
    const form = parseForm(keyForm, request.body);
    if (!form.ok) {
      const page = await keysPageOf(request, undefined);
      const chosenModels = tickedModels(request.body);
      return sendPage(reply, keysPage(accountFrame(request, reply, 'keys'), { ...page, limitsOf: limitsFor(request), models, state: form, chosenModels, formReference: formReference() }), 400);
    }
    // One key per rendered form: sent twice (a resubmit on a slow network), the second would
    // make a key whose secret nobody is shown.
    const claimId = `console-key-form:${accountIdOf(request)}:${form.data.reference}`;
    const claim = await formClaims.claim({ id: claimId, fingerprint: 'console key form', taskId: '', now: formClaims.now() });
    if (claim.kind !== 'claimed') return reply.redirect('/console/keys?notice=already_created', 303);
    let created;
    try {
      created = await apiKeys.create({
        accountId: accountIdOf(request),
        name: form.data.name,
        models: form.data.models.length > 0 ? form.data.models : null,
      });
    } catch (error) {
      // No key was made: the same form may try again.
      await formClaims.release(claimId, claim.record.created_at).catch(() => undefined);
      throw error;
    }
    const { key, plaintext } = created;
    setCreatedKeyCookie(reply, request.cookies[SESSION_COOKIE]!, { keyId: key._id, plaintext }, secureCookies);
    return reply.redirect('/console/keys/created', 303);
  });

  app.get('/keys/created', async (request, reply) => {
    const created = takeCreatedKey(request, reply, request.cookies[SESSION_COOKIE]!);
    const key = created ? await ownKey(request, created.keyId).catch(() => null) : null;
    const showable = key && !key.revoked_at && created ? { key, plaintext: created.plaintext } : { key: null, plaintext: null };
    return sendPage(reply, createdKeyPage(accountFrame(request, reply, 'keys'), showable));
  });

  app.get('/keys/:keyId/models', async (request, reply) => {
    const key = await ownKey(request, (request.params as { keyId: string }).keyId);
    if (key.revoked_at) return reply.redirect('/console/keys?notice=key_gone', 303);
    return sendPage(reply, keyModelsPage(accountFrame(request, reply, 'keys'), { key, models }));
  });

  app.post('/keys/:keyId/models', async (request, reply) => {
    const key = await ownKey(request, (request.params as { keyId: string }).keyId);
    // A deleted key uses no model: there is nothing left to change.
    if (key.revoked_at) return reply.redirect('/console/keys?notice=key_gone', 303);
    const form = parseForm(modelsForm, request.body);
    if (!form.ok) {
      const chosenModels = tickedModels(request.body);
      return sendPage(reply, keyModelsPage(accountFrame(request, reply, 'keys'), { key, models, state: form, chosenModels }), 400);
    }
    // The same change as the admin API's PUT /admin/keys/{id}/models.
    const chosen = form.data.models.length > 0 ? form.data.models : null;
    await apiKeys.setModels(key._id, chosen);
    request.log.info({ key_id: key._id, models: chosen }, 'key models changed in the console');
    return reply.redirect(`/console/keys?notice=${chosen ? 'models' : 'every_model'}`, 303);
  });

  app.get('/keys/:keyId/revoke', async (request, reply) => {
    const key = await ownKey(request, (request.params as { keyId: string }).keyId);
    if (key.revoked_at) return reply.redirect('/console/keys?notice=revoked', 303);
    return sendPage(reply, revokeConfirmPage(accountFrame(request, reply, 'keys'), key));
  });

  app.post('/keys/:keyId/revoke', async (request, reply) => {
    const key = await ownKey(request, (request.params as { keyId: string }).keyId);
    // The one revocation path, shared with the admin API: key authentication must honour it
    // from the very next request (test/console/keys.test.ts holds it to that).
    await apiKeys.revoke(key._id);
    request.log.info({ key_id: key._id }, 'key revoked in the console');
    return reply.redirect('/console/keys?notice=revoked', 303);
  });
}
