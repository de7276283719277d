import type { FastifyInstance, FastifyRequest } from 'fastify';
import { hashPassword, HashingBusy, verifyPassword } from '../../../core/passwords.ts';
import { accountFrame } from '../account-area.ts';
import { sendPage, type ConsoleContext } from '../context.ts';
import { changePasswordForm, parseForm } from '../forms.ts';
import { admitOrRefuse } from '../sign-in-throttle.ts';
import { passwordPage } from '../views/password.ts';

// A holder changes the password of the sign-in they used. The current password is checked as a
// sign-in is (counted against the same limits: a session left open must not become a way to
// guess it), the new one stored as a scrypt hash. Sessions are bound to the password they were
// opened with, so every other browser's ends; this one gets a session bound to the new one.

const CHANGED_NOTICE = { kind: 'success' as const, text: 'Password changed. Other browsers signed in to this account are signed out.' };
const BUSY = 'Too many passwords are being checked right now. Try again in a few seconds.';

export async function passwordRoutes(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  const { credentials, sessions, signInThrottle: throttle } = context;

  /** The sign-in this session was opened with (the account area's guard checked it holds). */
  function signInOf(request: FastifyRequest): string {
    const current = request.consoleSession;
    if (current.state !== 'valid' || !current.session.sign_in) throw new Error('password routes used outside a holder session');
    return current.session.sign_in;
  }

  app.get('/password', async (request, reply) => {
    const changed = (request.query as Record<string, unknown>).changed !== undefined;
    return sendPage(reply, passwordPage(accountFrame(request, reply, 'password'), { notice: changed ? CHANGED_NOTICE : null }));
  });

  app.post('/password', async (request, reply) => {
    const frame = accountFrame(request, reply, 'password');
    const form = parseForm(changePasswordForm, request.body);
    if (!form.ok) return sendPage(reply, passwordPage(frame, { state: form }), 400);
    const signIn = signInOf(request);
    const decision = await admitOrRefuse(throttle, { who: signIn, address: request.ip }, request, reply);
    if ('refusal' in decision) return sendPage(reply, passwordPage(frame, { state: { errors: { form: decision.refusal } } }), 429);
    const credential = await credentials.find(signIn);
    let matches: boolean;
    try {
      matches = credential !== null && (await verifyPassword(form.data.current_password, credential.password_hash));
    } catch (error) {
      // Undecided: not a failure of the holder's.
      await throttle.takeBack(decision.admitted);
      if (!(error instanceof HashingBusy)) throw error;
      reply.header('retry-after', '5');
      return sendPage(reply, passwordPage(frame, { state: { errors: { form: BUSY } } }), 503);
    }
    if (!matches || !credential) {
      request.log.info('console password change refused: wrong current password');
      return sendPage(reply, passwordPage(frame, { state: { errors: { current_password: 'That is not your current password.' } } }), 401);
    }
    await throttle.succeeded(decision.admitted);
    const passwordHash = await hashPassword(form.data.new_password);
    await credentials.setPassword({ email: credential._id, accountId: credential.account_id, passwordHash });
    await sessions.start(reply, { kind: 'account', accountId: credential.account_id, signIn: credential._id, secret: passwordHash });
    request.log.info('console password changed by its holder');
    return reply.redirect('/console/password?changed=1', 303);
  });
}
