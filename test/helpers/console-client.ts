import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { TEST_ADMIN_TOKEN } from './app.ts';

// A tiny browser for the web console over Fastify inject: it keeps cookies the way a browser
// does (path /console, cleared by Max-Age=0 or a past Expires) and reads the CSRF token out of
// the last page, so tests post forms exactly as a person's browser would, or deliberately not.

export type FormFields = Record<string, string | string[] | undefined>;

export class ConsoleClient {
  readonly cookies = new Map<string, string>();
  lastPage = '';

  /** `remoteAddress`: the address the requests come from (127.0.0.1 unless told); `headers`
   * go with every request (an X-Forwarded-For, say). */
  constructor(
    private readonly app: FastifyInstance,
    private readonly remoteAddress?: string,
    private readonly headers: Record<string, string> = {},
  ) {}

  private remember(response: LightMyRequestResponse): void {
    for (const cookie of response.cookies as Array<{ name: string; value: string; maxAge?: number; expires?: Date }>) {
      const expired = cookie.maxAge === 0 || (cookie.expires !== undefined && cookie.expires.getTime() <= Date.now()) || cookie.value === '';
      if (expired) this.cookies.delete(cookie.name);
      else this.cookies.set(cookie.name, cookie.value);
    }
    if (String(response.headers['content-type'] ?? '').startsWith('text/html')) this.lastPage = response.body;
  }

  private cookieHeader(): Record<string, string> {
    if (this.cookies.size === 0) return { ...this.headers };
    return { ...this.headers, cookie: [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ') };
  }

  async get(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const response = await this.app.inject({ method: 'GET', url, headers: { ...headers, ...this.cookieHeader() }, ...(this.remoteAddress ? { remoteAddress: this.remoteAddress } : {}) });
    this.remember(response);
    return response;
  }

  /** The CSRF token of the last page, or of a fresh page at `url`. */
  async csrfToken(url?: string): Promise<string> {
    if (url) await this.get(url);
    const token = /name="_csrf" value="([^"]+)"/.exec(this.lastPage)?.[1];
    if (!token) throw new Error('no CSRF token on the last page');
    return token;
  }

  /** Posts a urlencoded form; `csrf: false` leaves the token out, a string sends that token. */
  async post(url: string, fields: FormFields, options: { csrf?: string | false } = {}): Promise<LightMyRequestResponse> {
    const body = new URLSearchParams();
    const token = options.csrf === undefined ? await this.csrfToken() : options.csrf;
    if (token !== false) body.append('_csrf', token);
    // A form's one-time reference travels as a hidden field, as a browser sends it.
    const reference = fields.reference === undefined ? /name="reference" value="([^"]+)"/.exec(this.lastPage)?.[1] : undefined;
    if (reference !== undefined) body.append('reference', reference);
    for (const [name, value] of Object.entries(fields)) {
      for (const item of value === undefined ? [] : [value].flat()) body.append(name, item);
    }
    const response = await this.app.inject({
      method: 'POST',
      url,
      headers: { ...this.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: body.toString(),
      ...(this.remoteAddress ? { remoteAddress: this.remoteAddress } : {}),
    });
    this.remember(response);
    return response;
  }

  async signIn(email: string, password: string): Promise<LightMyRequestResponse> {
    await this.get('/console/sign-in');
    return this.post('/console/sign-in', { email, password });
  }

  async signInAsOperator(token = TEST_ADMIN_TOKEN): Promise<LightMyRequestResponse> {
    await this.get('/console/operator/sign-in');
    return this.post('/console/operator/sign-in', { admin_token: token });
  }
}

/** Text of the page without tags, for assertions about what a person reads. */
export function visibleText(page: string): string {
  return page
    .replace(/<(script|style)[\s\S]*?<\/\1>/g, '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&amp;/g, '&')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/\s+/g, ' ')
    .trim();
}

export function createAccountWithSignIn(app: FastifyInstance, body: { name: string; balance_usd?: number; console_email: string; console_password: string }) {
  return app.inject({ method: 'POST', url: '/admin/accounts', headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, payload: body }).then((response) => {
    if (response.statusCode !== 201) throw new Error(`account creation failed: ${response.statusCode} ${response.body}`);
    return response.json() as { id: string; name: string; webhook_secret: string };
  });
}
