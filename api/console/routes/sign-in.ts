import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HashingBusy, spendDecoyVerification, verifyPassword } from '../../../core/passwords.ts';
import { secretMatches } from '../../../core/secret-match.ts';
import { sendPage, type ConsoleContext } from '../context.ts';
import { SESSION_COOKIE } from '../sessions.ts';
import { consolePageOrNull } from '../return-to.ts';
import { admitOrRefuse } from '../sign-in-throttle.ts';
import { operatorSignInForm, parseForm, signInForm } from '../forms.ts';
import { accountSignInPage, operatorSignInPage, SESSION_EXPIRED_NOTICE, SIGNED_OUT_NOTICE, signOutPage } from '../views/sign-in.ts';

// Signing in and out. Both sign-in forms answer a wrong secret with the same words whatever
// was wrong (unknown email or bad password), and an unknown email costs a hash all the same.

const WRONG_CREDENTIALS = 'The email or password is not right.';

/** Who the operator form's attempts count as (it has no email). */
const OPERATOR = 'operator';
const BUSY_RETRY_SECONDS = 5;
const BUSY = `Too many sign-ins are being checked right now. Try again in ${BUSY_RETRY_SECONDS} seconds.`;

/** The page to return to after signing in, from the sign-in page's own address. */
function nextFrom(request: FastifyRequest): string | null {
  return consolePageOrNull((request.query as Record<string, unknown>).next);
}

function noticeFrom(request: FastifyRequest, reply: FastifyReply) {
  const query = request.query as Record<string, unknown>;
  // A session cookie whose session ended, sent to the sign-in page itself (a bookmark, or
  // /console/): told here as on every other page, and dropped.
  const ended = request.consoleSession.state === 'expired';
  if (ended) reply.clearCookie(SESSION_COOKIE, { path: '/console' });
  if (query.expired !== undefined || ended) return SESSION_EXPIRED_NOTICE;
  if (query.signed_out !== undefined) return SIGNED_OUT_NOTICE;
  return null;
}

export async function signInRoutes(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  const { sessions, credentials, accounts, config, signInThrottle: throttle } = context;

  app.get('/', async (request, reply) => {
    await sessions.load(request);
    const current = request.consoleSession;
    if (current.state === 'expired') reply.clearCookie(SESSION_COOKIE, { path: '/console' });
    if (current.state !== 'valid') return reply.redirect(current.state === 'expired' ? '/console/sign-in?expired=1' : '/console/sign-in', 303);
    return reply.redirect(current.session.kind === 'operator' ? '/console/operator' : '/console/keys', 303);
  });

  app.get('/sign-in', async (request, reply) => {
    await sessions.load(request);
    if (request.consoleSession.state === 'valid' && request.consoleSession.session.kind === 'account') return reply.redirect('/console/keys', 303);
    return sendPage(reply, accountSignInPage({ csrfToken: reply.generateCsrf(), notice: noticeFrom(request, reply), next: nextFrom(request) }));
  });

  app.post('/sign-in', async (request, reply) => {
    const form = parseForm(signInForm, request.body);
    const csrfToken = reply.generateCsrf();
    const next = consolePageOrNull((request.body as Record<string, unknown> | undefined)?.next);
    if (!form.ok) return sendPage(reply, accountSignInPage({ csrfToken, state: form, next }), 400);
    const decision = await admitOrRefuse(throttle, { who: form.data.email, address: request.ip }, request, reply);
    if ('refusal' in decision) return sendPage(reply, accountSignInPage({ csrfToken, state: { values: { email: form.data.email }, errors: { form: decision.refusal } }, next }), 429);
    const attempt = decision.admitted;
    let credential: Awaited<ReturnType<typeof credentials.find>>;
    let account: Awaited<ReturnType<typeof accounts.find>>;
    try {
      credential = await credentials.find(form.data.email);
      const passwordMatches = credential ? await verifyPassword(form.data.password, credential.password_hash) : (await spendDecoyVerification(form.data.password), false);
      account = credential && passwordMatches ? await accounts.find(credential.account_id) : null;
    } catch (error) {
      // Undecided (the store away, the hashing queue full): not a failure of the caller's.
      await throttle.takeBack(attempt);
      if (!(error instanceof HashingBusy)) throw error;
      request.log.warn('console sign-in refused: too many passwords being checked');
      reply.header('retry-after', String(BUSY_RETRY_SECONDS));
      return sendPage(reply, accountSignInPage({ csrfToken, state: { values: { email: form.data.email }, errors: { form: BUSY } }, next }), 503);
    }
    if (!credential || !account) {
      request.log.info({ email_known: Boolean(credential) }, 'console sign-in refused');
      const state = { values: { email: form.data.email }, errors: { form: WRONG_CREDENTIALS } };
      return sendPage(reply, accountSignInPage({ csrfToken, state, next }), 401);
    }
    await throttle.succeeded(attempt);
    await sessions.start(reply, { kind: 'account', accountId: account._id, signIn: credential._id, secret: credential.password_hash });
    return reply.redirect(form.data.next ?? '/console/keys', 303);
  });

  app.get('/operator/sign-in', async (request, reply) => {
    await sessions.load(request);
    if (request.consoleSession.state === 'valid' && request.consoleSession.session.kind === 'operator') return reply.redirect('/console/operator', 303);
    return sendPage(reply, operatorSignInPage({ csrfToken: reply.generateCsrf(), notice: noticeFrom(request, reply), disabled: !config.ADMIN_TOKEN, next: nextFrom(request) }));
  });

  app.post('/operator/sign-in', async (request, reply) => {
    const disabled = !config.ADMIN_TOKEN;
    const csrfToken = reply.generateCsrf();
    if (!config.ADMIN_TOKEN) return sendPage(reply, operatorSignInPage({ csrfToken, disabled }), 503);
    const form = parseForm(operatorSignInForm, request.body);
    const next = consolePageOrNull((request.body as Record<string, unknown> | undefined)?.next);
    if (!form.ok) return sendPage(reply, operatorSignInPage({ csrfToken, state: form, disabled, next }), 400);
    const decision = await admitOrRefuse(throttle, { who: OPERATOR, address: request.ip }, request, reply);
    if ('refusal' in decision) return sendPage(reply, operatorSignInPage({ csrfToken, state: { errors: { form: decision.refusal } }, disabled, next }), 429);
    const attempt = decision.admitted;
    if (!secretMatches(form.data.admin_token, config.ADMIN_TOKEN)) {
      request.log.info('console operator sign-in refused');
      return sendPage(reply, operatorSignInPage({ csrfToken, state: { errors: { form: 'That is not the admin token.' } }, disabled, next }), 401);
    }
    await throttle.succeeded(attempt);
    await sessions.start(reply, { kind: 'operator', accountId: null, signIn: null, secret: config.ADMIN_TOKEN });
    return reply.redirect(form.data.next ?? '/console/operator', 303);
  });

  app.get('/sign-out', async (request, reply) => {
    await sessions.load(request);
    const current = request.consoleSession;
    if (current.state === 'expired') reply.clearCookie(SESSION_COOKIE, { path: '/console' });
    if (current.state !== 'valid') return reply.redirect(current.state === 'expired' ? '/console/sign-in?expired=1' : '/console/sign-in', 303);
    return sendPage(reply, signOutPage({ csrfToken: reply.generateCsrf(), home: current.session.kind === 'operator' ? '/console/operator' : '/console/keys' }));
  });

  app.post('/sign-out', async (request, reply) => {
    await sessions.end(request, reply);
    return reply.redirect('/console/sign-in?signed_out=1', 303);
  });
}
