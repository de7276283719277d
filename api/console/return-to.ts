import type { FastifyRequest } from 'fastify';

// Where a holder or operator goes back to after signing in again: the console page whose
// request found the session expired (a review landed on the keys page whatever it had open).
// Only a console page of this origin is taken, never a URL that could leave it (`//host`, a
// scheme, a backslash a browser reads as a slash, dot segments) nor the sign-in and sign-out
// pages.

const MAX_LENGTH = 1024;
const CONSOLE_PAGE = /^\/console\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*$/;

/** `value` when it is a console page to return to, else null. */
export function consolePageOrNull(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > MAX_LENGTH || !CONSOLE_PAGE.test(value) || value.includes('//')) return null;
  // As a browser resolves it: dot segments (`/console/../admin`, `%2e%2e` too) climb out.
  const { pathname } = new URL(value, 'http://console.invalid');
  // Decoded, as the router matches it (`/console/sign%2Din` is the sign-in page).
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return null;
  }
  if (!decoded.startsWith('/console/') || /^\/console\/(?:operator\/)?sign-(?:in|out)(?:\/|$)/.test(decoded)) return null;
  return value;
}

/** The sign-in page's address for a request that needs a session: with `next` when the request
 * was a page view (a GET) worth returning to. */
export function signInAddress(request: FastifyRequest, signIn: string, expired: boolean): string {
  const params = new URLSearchParams();
  if (expired) params.set('expired', '1');
  const next = request.method === 'GET' ? consolePageOrNull(request.url) : null;
  if (next) params.set('next', next);
  const query = params.toString();
  return query ? `${signIn}?${query}` : signIn;
}
