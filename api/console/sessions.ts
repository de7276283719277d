import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CookieSerializeOptions } from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ConsoleSessionDocument, ConsoleSessionKind, ConsoleSessionStore } from '../../store/console-sessions.ts';
import { CSRF_COOKIE } from './csrf.ts';
import { signInAddress } from './return-to.ts';

// The console's sign-in state: a random token in an HttpOnly, SameSite=Lax cookie scoped to
// /console, looked up in `console_sessions` on every console request. Lifetimes are absolute
// (CONSOLE_SESSION_TTL_SECONDS from sign-in): a session is never extended, so no page view
// writes to the store. Each session is bound to the secret it was opened with, so a new
// password (or a new ADMIN_TOKEN) ends the sessions opened with the old one.

export const SESSION_COOKIE = 'fg_console_session';

/** What a session is bound to: an HMAC of the secret keyed by the session's own token. The
 * store keeps only a hash of the token, so it holds neither the secret nor anything to test
 * guesses of it against offline (a plain digest of ADMIN_TOKEN would be one). */
function sessionBinding(secret: string, token: string): string {
  return createHmac('sha256', token).update(`framegate console session:${secret}`).digest('hex').slice(0, 32);
}

/** The request's valid session was opened with `secret` (a password hash, ADMIN_TOKEN). */
export function sessionBoundTo(request: FastifyRequest, secret: string): boolean {
  const current = request.consoleSession;
  if (current.state !== 'valid') return false;
  const expected = Buffer.from(sessionBinding(secret, current.token));
  const stored = Buffer.from(current.session.bound_to);
  return expected.length === stored.length && timingSafeEqual(expected, stored);
}

export type SessionState =
  | { state: 'valid'; session: ConsoleSessionDocument; token: string }
  | { state: 'expired' }
  | { state: 'none' };

declare module 'fastify' {
  interface FastifyRequest {
    consoleSession: SessionState;
  }
}

// Expired sessions are deleted when seen; this sweep catches the ones never seen again. It
// scans the collection on FerretDB, so it runs at most this often per process, after sign-ins.
const SWEEP_INTERVAL_MS = 10 * 60_000;

/** How long the browser keeps the session cookie past the session's own end. The store decides
 * when a session ends; the cookie outlives it so that the next page can say the session expired
 * (a cookie whose Max-Age ended with the session is never sent again, and a real browser then
 * showed a bare sign-in form, also after a "Delete key" sent with it, which had done nothing). */
const COOKIE_GRACE_SECONDS = 7 * 86_400;

export class ConsoleSessions {
  private lastSweep = 0;

  constructor(
    private readonly store: ConsoleSessionStore,
    private readonly options: { ttlSeconds: number; secureCookies: boolean },
  ) {}

  cookieOptions(): CookieSerializeOptions {
    // Lax, not Strict: a link into the console from elsewhere (a chat, an email) should open
    // the page signed in; every state change is a POST, and those also need a CSRF token.
    return { path: '/console', httpOnly: true, sameSite: 'lax', secure: this.options.secureCookies, maxAge: this.options.ttlSeconds + COOKIE_GRACE_SECONDS };
  }

  /** onRequest hook for every console route. */
  async load(request: FastifyRequest): Promise<void> {
    const token = request.cookies[SESSION_COOKIE];
    if (!token) {
      request.consoleSession = { state: 'none' };
      return;
    }
    const found = await this.store.findByToken(token);
    // A session cookie the store no longer knows belonged to a session that ended: expired and
    // swept, or ended by a new password. Either way the holder is told the session expired.
    request.consoleSession = found.state === 'valid' ? { state: 'valid', session: found.session, token } : { state: 'expired' };
  }

  async start(reply: FastifyReply, opened: { kind: ConsoleSessionKind; accountId: string | null; signIn: string | null; secret: string }): Promise<void> {
    // A session left from an earlier sign-in in this browser ends here, so signing in as
    // someone else never leaves the other session usable behind the new cookie.
    const previous = reply.request.cookies[SESSION_COOKIE];
    if (previous) await this.store.deleteByToken(previous);
    const { token } = await this.store.create({
      kind: opened.kind,
      accountId: opened.accountId,
      signIn: opened.signIn,
      boundTo: (token) => sessionBinding(opened.secret, token),
      ttlSeconds: this.options.ttlSeconds,
    });
    reply.setCookie(SESSION_COOKIE, token, this.cookieOptions());
    forgetFormsRendered(reply);
    this.sweepNowAndThen(reply.request);
  }

  async end(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const token = request.cookies[SESSION_COOKIE];
    if (token) await this.store.deleteByToken(token);
    reply.clearCookie(SESSION_COOKIE, { path: '/console' });
    forgetFormsRendered(reply);
  }

  private sweepNowAndThen(request: FastifyRequest): void {
    const now = Date.now();
    if (now - this.lastSweep < SWEEP_INTERVAL_MS) return;
    this.lastSweep = now;
    this.store.deleteExpired().catch((error: unknown) => request.log.warn({ err: error }, 'sweeping expired console sessions failed'));
  }
}

/**
 * A new CSRF secret (made on the next page) at every sign-in and sign-out, so every form rendered
 * before is refused as expired. Forms act on whoever is signed in when they are sent: without
 * this, a page left open from one account, sent after the browser had signed in to another in a
 * second tab, created its key in (or rotated the webhook secret of) the other account.
 */
function forgetFormsRendered(reply: FastifyReply): void {
  reply.clearCookie(CSRF_COOKIE, { path: '/console' });
}

/** The signed-in session of an area, or null after replying with a redirect to its sign-in. */
export function sessionOrRedirect(request: FastifyRequest, reply: FastifyReply, kind: ConsoleSessionKind): ConsoleSessionDocument | null {
  const current = request.consoleSession;
  if (current.state === 'valid' && current.session.kind === kind) return current.session;
  if (current.state === 'valid') {
    // Signed in to the other area: go to its home rather than to a sign-in form.
    void reply.redirect(current.session.kind === 'operator' ? '/console/operator' : '/console/keys', 303);
    return null;
  }
  const signIn = kind === 'operator' ? '/console/operator/sign-in' : '/console/sign-in';
  if (current.state === 'expired') reply.clearCookie(SESSION_COOKIE, { path: '/console' });
  void reply.redirect(signInAddress(request, signIn, current.state === 'expired'), 303);
  return null;
}
