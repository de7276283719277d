import fastifyCsrfProtection from '@fastify/csrf-protection';
import type { FastifyInstance, FastifyRequest } from 'fastify';

// Every console form carries a CSRF token (the hidden `_csrf` field from views/layout.ts
// csrfField), checked on every POST before its body is even validated. The secret behind the
// tokens lives in its own HttpOnly, SameSite=Strict cookie, so the sign-in forms are protected
// too (login CSRF), before any session exists.

export const CSRF_COOKIE = 'fg_console_csrf';

function tokenFromForm(request: FastifyRequest): string | undefined {
  // Only the form field: a header would invite cross-origin scripts to try their luck.
  const body = request.body as Record<string, unknown> | undefined;
  return typeof body?._csrf === 'string' ? body._csrf : undefined;
}

export async function registerCsrfProtection(app: FastifyInstance, options: { secureCookies: boolean }): Promise<void> {
  await app.register(fastifyCsrfProtection, {
    cookieKey: CSRF_COOKIE,
    cookieOpts: { path: '/console', httpOnly: true, sameSite: 'strict', secure: options.secureCookies },
    getToken: tokenFromForm,
  });
  // preValidation: the body is parsed by then (the token is in it) but not yet validated.
  app.addHook('preValidation', (request, reply, done) => {
    if (request.method === 'POST') app.csrfProtection(request, reply, done);
    else done();
  });
}
