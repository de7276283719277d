import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import { openClip } from '../../services/task-clips.ts';
import { CONSOLE_CLIP_CACHING, clipRequestOf, sendClip } from '../../clip-reply.ts';
import { LATEST_TASKS_LIMIT, sendPage, type ConsoleContext } from '../context.ts';
import { addCreditsForm, createAccountForm, formReference, parseForm, signInCredentialsForm } from '../forms.ts';
import { signInAddress } from '../return-to.ts';
import { sessionBoundTo, sessionOrRedirect } from '../sessions.ts';
import type { FormState } from '../views/fields.ts';
import type { Notice } from '../views/layout.ts';
import { operatorAccountPage } from '../views/operator-account.ts';
import { operatorAccountsPage } from '../views/operator-accounts.ts';
import { taskPagesAt } from '../views/tasks.ts';
import { formatUsd } from '../views/format.ts';
import { configuredLimits } from '../../services/rate-limits/limit-settings.ts';
import { operatorLimitRoutes } from './operator-limits.ts';
import { addCredits } from '../../services/credit-addition.ts';

// The operator's pages (signed in with the admin token): accounts, creating one with its
// holder's console sign-in, credits, and each account's keys, spend and tasks, with links into
// the Temporal Web UI. They use the admin API's stores and onboarding service.

const PAGE_SIZE = 50;

const NOTICES: Record<string, Notice> = {
  created: { kind: 'success', text: 'Account created.' },
  credited: { kind: 'success', text: 'Credits added.' },
  credited_before: { kind: 'warning', text: 'That form was sent already: its credits were added once, then.' },
  deducted: { kind: 'success', text: 'Credits taken back.' },
  deducted_before: { kind: 'warning', text: 'That form was sent already: its amount was taken back once, then.' },
  sign_in_created: { kind: 'success', text: 'Console sign-in added.' },
  password_changed: { kind: 'success', text: 'Password changed.' },
  limits_saved: { kind: 'success', text: 'Rate limits saved. Every api process applies them within seconds.' },
  key_revoked: { kind: 'success', text: 'Key deleted. Every call made with it now answers 401.' },
  key_models_saved: { kind: 'success', text: 'Models saved. The key’s next call may use those models and no others (403 for the rest).' },
  key_gone: { kind: 'warning', text: 'That key is deleted: it uses no model, and its models were not changed.' },
  key_gone_limits: { kind: 'warning', text: 'That key is deleted: it makes no calls, so rate limits do not apply to it.' },
  key_every_model: { kind: 'success', text: 'Models saved: none ticked, so the key may use every model from its next call.' },
};

/** Forms on the account page that can come back refused, with what was typed. */
export type AccountForms = { creditsState?: FormState; deductionState?: FormState; signInState?: FormState; limitsState?: FormState };

function noticeFrom(request: FastifyRequest): Notice | null {
  const notice = (request.query as Record<string, unknown>).notice;
  return typeof notice === 'string' ? (NOTICES[notice] ?? null) : null;
}

export async function operatorRoutes(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  const { accounts, apiKeys, tasks, credentials, usageReports, onboarding, config, publicBaseUrl } = context;
  const temporalUi = config.TEMPORAL_UI_URL.replace(/\/+$/, '');
  const temporalHref = (taskId: string) => `${temporalUi}/namespaces/${encodeURIComponent(config.TEMPORAL_NAMESPACE)}/workflows/${encodeURIComponent(taskId)}`;

  app.addHook('onRequest', async (request, reply) => {
    await context.sessions.load(request);
    const session = sessionOrRedirect(request, reply, 'operator');
    if (!session) return reply;
    // Sessions opened with an earlier ADMIN_TOKEN end when the token is changed.
    if (!config.ADMIN_TOKEN || !sessionBoundTo(request, config.ADMIN_TOKEN)) {
      await context.sessions.end(request, reply);
      return reply.redirect(signInAddress(request, '/console/operator/sign-in', true), 303);
    }
  });

  async function renderAccount(request: FastifyRequest, reply: FastifyReply, accountId: string, forms: AccountForms = {}, status = 200) {
    const account = await accounts.findWithLimits(accountId);
    if (!account) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    const query = request.query as Record<string, unknown>;
    const keysPage = Number.parseInt(String(query.keys_page ?? '1'), 10) || 1;
    // A cursor that is no task of the account starts from the newest.
    const after = typeof query.tasks_after === 'string' && query.tasks_after !== '' ? ((await tasks.findForAccount(query.tasks_after, accountId)) ?? undefined) : undefined;
    const [consoleEmails, keys, usageByKey, latestTasks] = await Promise.all([
      credentials.emailsOf(accountId),
      apiKeys.listForAccount(accountId),
      usageReports.summarise({ accountId }).then((usage) => usage.byKey()),
      tasks.listLatest({ accountId, limit: LATEST_TASKS_LIMIT, after }),
    ]);
    const accountPath = `/console/operator/accounts/${encodeURIComponent(accountId)}`;
    const keyNames = new Map(keys.map((key) => [key._id, key.name]));
    const page = operatorAccountPage({
      csrfToken: reply.generateCsrf(),
      account,
      consoleEmails,
      keys,
      usageByKey,
      keysPage,
      tasks: latestTasks.tasks,
      taskPages: taskPagesAt(accountPath, { keys_page: keysPage > 1 ? String(keysPage) : undefined }, { ...latestTasks, isFirstPage: !after }),
      taskLinks: { publicBaseUrl, detailHref: null, temporalHref, keyNames, gatewayClipHref: (taskId) => `${accountPath}/tasks/${taskId}/clip` },
      creditReference: formReference(),
      defaultLimits: configuredLimits(config),
      notice: noticeFrom(request),
      ...forms,
    });
    return sendPage(reply, page, status);
  }

  async function renderAccounts(request: FastifyRequest, reply: FastifyReply, state?: FormState, status = 200) {
    const pageNumber = Math.max(1, Math.min(10_000, Number.parseInt(String((request.query as Record<string, unknown>).page ?? '1'), 10) || 1));
    // One more than a page tells whether there is a next one.
    const found = await accounts.list({ limit: PAGE_SIZE + 1, skip: (pageNumber - 1) * PAGE_SIZE });
    const page = operatorAccountsPage({
      csrfToken: reply.generateCsrf(),
      accounts: found.slice(0, PAGE_SIZE),
      page: pageNumber,
      hasNextPage: found.length > PAGE_SIZE,
      state,
      notice: noticeFrom(request),
    });
    return sendPage(reply, page, status);
  }

  const accountIdParam = (request: FastifyRequest) => (request.params as { accountId: string }).accountId;

  app.get('/', (request, reply) => renderAccounts(request, reply));

  app.post('/accounts', async (request, reply) => {
    const form = parseForm(createAccountForm, request.body);
    if (!form.ok) return renderAccounts(request, reply, form, 400);
    const { console_email: email, console_password: password } = form.data;
    try {
      const { account } = await onboarding.createAccount({
        name: form.data.name,
        balanceMicros: form.data.opening_balance_usd ?? 0,
        signIn: email && password ? { email, password } : undefined,
      });
      request.log.info({ account_id: account._id }, 'account created in the console');
      return reply.redirect(`/console/operator/accounts/${account._id}?notice=created`, 303);
    } catch (error) {
      if (!(error instanceof GatewayError) || error.code !== 'conflict') throw error;
      const values = { name: form.data.name, console_email: email ?? '', opening_balance_usd: String((request.body as Record<string, unknown>).opening_balance_usd ?? '') };
      return renderAccounts(request, reply, { values, errors: { console_email: error.message } }, 409);
    }
  });

  app.get('/accounts/:accountId', (request, reply) => renderAccount(request, reply, accountIdParam(request)));

  app.get('/accounts/:accountId/tasks/:taskId/clip', async (request, reply) => {
    const task = await tasks.findForAccount((request.params as { taskId: string }).taskId, accountIdParam(request));
    if (!task) throw new GatewayError('task_not_found', 'There is no such task in this account.');
    return sendClip(reply, await openClip(task, context.clipSources, clipRequestOf(request), "in the account's task list, or in its workflow history in the Temporal Web UI"), CONSOLE_CLIP_CACHING);
  });

  await app.register(operatorLimitRoutes, { context, renderAccount });

  /** The account page again with the form's amount and why it was refused (409: past the funds
   * limit, or more than the free balance); any other error goes on. */
  const refusedAmount = (request: FastifyRequest, reply: FastifyReply, accountId: string, form: 'creditsState' | 'deductionState', error: unknown) => {
    if (!(error instanceof GatewayError) || error.code !== 'conflict') throw error;
    const values = { amount_usd: String((request.body as Record<string, unknown>).amount_usd ?? '') };
    return renderAccount(request, reply, accountId, { [form]: { values, errors: { amount_usd: error.message } } }, 409);
  };

  /** The form's reference names the ledger entry, so a resubmitted form moves money once. One
   * resubmitted with another amount (sent, stopped, corrected, sent again) moved nothing: it is
   * refused, not reported done, as the admin API's 422 does. Scoped to the account in the URL. */
  const movementReference = (accountId: string, reference: string) => `console:${accountId}:${reference}`;
  const movedOnce = async (accountId: string, reference: string, operation: 'credit' | 'deduct', amountMicros: number) => {
    const moved = await accounts.movedUnder(accountId, reference, operation);
    if (moved === amountMicros) return;
    const what = operation === 'credit' ? 'added' : 'taken back';
    throw new GatewayError('conflict', `This form was already sent with ${formatUsd(moved ?? 0)}, which was ${what}; nothing more moved. Reload the page to send another amount.`);
  };

  app.post('/accounts/:accountId/credits', async (request, reply) => {
    const accountId = accountIdParam(request);
    const form = parseForm(addCreditsForm, request.body);
    if (!form.ok) return renderAccount(request, reply, accountId, { creditsState: form }, 400);
    const reference = movementReference(accountId, form.data.reference);
    // A form sent again (a resubmit on a slow network) moves nothing; it is told so, not "added".
    const before = await accounts.movedUnder(accountId, reference, 'credit');
    let credited;
    try {
      credited = await addCredits(accounts, accountId, form.data.amount_usd, reference);
      if (credited) await movedOnce(accountId, reference, 'credit', form.data.amount_usd);
    } catch (error) {
      return refusedAmount(request, reply, accountId, 'creditsState', error);
    }
    if (!credited) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    request.log.info({ account_id: accountId, amount_micros: form.data.amount_usd, again: before !== null }, 'credits added in the console');
    return reply.redirect(`/console/operator/accounts/${accountId}?notice=${before === null ? 'credited' : 'credited_before'}`, 303);
  });

  app.post('/accounts/:accountId/deductions', async (request, reply) => {
    const accountId = accountIdParam(request);
    const form = parseForm(addCreditsForm, request.body);
    if (!form.ok) return renderAccount(request, reply, accountId, { deductionState: form }, 400);
    // The same reference as the credits form, another ledger operation.
    const reference = movementReference(accountId, form.data.reference);
    const before = await accounts.movedUnder(accountId, reference, 'deduct');
    let deducted;
    try {
      deducted = await context.deductions.deduct(accountId, form.data.amount_usd, reference);
      if (deducted) await movedOnce(accountId, reference, 'deduct', form.data.amount_usd);
    } catch (error) {
      return refusedAmount(request, reply, accountId, 'deductionState', error);
    }
    if (!deducted) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    request.log.info({ account_id: accountId, amount_micros: form.data.amount_usd, again: before !== null }, 'credits taken back in the console');
    return reply.redirect(`/console/operator/accounts/${accountId}?notice=${before === null ? 'deducted' : 'deducted_before'}`, 303);
  });

  app.post('/accounts/:accountId/sign-ins', async (request, reply) => {
    const accountId = accountIdParam(request);
    const form = parseForm(signInCredentialsForm, request.body);
    if (!form.ok) return renderAccount(request, reply, accountId, { signInState: form }, 400);
    if (!(await accounts.find(accountId))) throw new GatewayError('resource_not_found', `There is no account '${accountId}'.`);
    try {
      const outcome = await onboarding.setSignIn(accountId, { email: form.data.console_email, password: form.data.console_password });
      const notice = outcome === 'created' ? 'sign_in_created' : 'password_changed';
      return reply.redirect(`/console/operator/accounts/${accountId}?notice=${notice}`, 303);
    } catch (error) {
      if (!(error instanceof GatewayError) || error.code !== 'conflict') throw error;
      return renderAccount(request, reply, accountId, { signInState: { values: { console_email: form.data.console_email }, errors: { console_email: error.message } } }, 409);
    }
  });
}
