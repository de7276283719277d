import { createHmac, randomBytes } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import fastifyFormbody from '@fastify/formbody';
import type { CreditDeductions } from '../services/credit-deduction.ts';
import type { FastifyInstance } from 'fastify';
import type { Db } from 'mongodb';
import type { Catalog } from '../../core/catalog.ts';
import { publicBaseUrl, type Config } from '../../core/config.ts';
import type { AccountStore } from '../../store/accounts.ts';
import type { ApiKeyStore } from '../../store/api-keys.ts';
import { ConsoleCredentialStore } from '../../store/console-credentials.ts';
import { ConsoleSessionStore } from '../../store/console-sessions.ts';
import type { TaskStore } from '../../store/tasks.ts';
import { UsageReports } from '../../store/usage-reports.ts';
import type { AccountOnboarding } from '../services/account-onboarding.ts';
import type { RateLimitSettings } from '../services/rate-limits/limit-settings.ts';
import type { ClipSources } from '../services/task-clips.ts';
import { accountArea } from './account-area.ts';
import type { ConsoleContext } from './context.ts';
import { registerCsrfProtection } from './csrf.ts';
import { registerConsoleErrorPages } from './errors.ts';
import { assetRoutes } from './routes/assets.ts';
import { operatorRoutes } from './routes/operator.ts';
import { signInRoutes } from './routes/sign-in.ts';
import { ConsoleSessions } from './sessions.ts';
import { SignInFailureStore } from '../../store/sign-in-failures.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { StoreClock } from '../../store/store-clock.ts';
import { SignInThrottle } from './sign-in-throttle.ts';

// The web console, mounted under /console on the api's own Fastify app: server-rendered pages,
// forms that work without JavaScript, the same stores and services as the admin API. Cookies,
// urlencoded bodies, CSRF checks and HTML error pages are registered inside this plugin only,
// so /v1 and /admin keep accepting JSON alone and answering errors as JSON.

export interface ConsoleOptions {
  config: Config;
  catalog: Catalog;
  db: Db;
  accounts: AccountStore;
  apiKeys: ApiKeyStore;
  tasks: TaskStore;
  onboarding: AccountOnboarding;
  rateLimits: RateLimitSettings;
  clipSources: ClipSources;
  deductions: CreditDeductions;
}

// No inline script or style anywhere: the policy forbids them, so injected markup cannot run.
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "style-src 'self'",
  "script-src 'self'",
  "img-src 'self' data:",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

/** The key of the sign-in counts' digests: from ADMIN_TOKEN, the one secret every api process
 * shares and the store does not hold. Without it (no operator sign-in, no admin API) each
 * process draws its own, and counts only its own attempts. */
function signInDigestKey(adminToken: string | undefined): Buffer {
  return adminToken ? createHmac('sha256', adminToken).update('framegate console sign-in counts').digest() : randomBytes(32);
}

export async function consolePlugin(app: FastifyInstance, options: ConsoleOptions): Promise<void> {
  const baseUrl = publicBaseUrl(options.config);
  const secureCookies = baseUrl.startsWith('https:');
  const storeClock = new StoreClock(options.db);
  const context: ConsoleContext = {
    config: options.config,
    catalog: options.catalog,
    accounts: options.accounts,
    apiKeys: options.apiKeys,
    tasks: options.tasks,
    onboarding: options.onboarding,
    rateLimits: options.rateLimits,
    credentials: new ConsoleCredentialStore(options.db),
    usageReports: new UsageReports(options.db),
    sessions: new ConsoleSessions(new ConsoleSessionStore(options.db), { ttlSeconds: options.config.CONSOLE_SESSION_TTL_SECONDS, secureCookies }),
    // Timed by the store's clock, as every api process reads the same attempts.
    signInThrottle: new SignInThrottle(new SignInFailureStore(options.db, signInDigestKey(options.config.ADMIN_TOKEN)), () => storeClock.now()),
    publicBaseUrl: baseUrl,
    secureCookies,
    clipSources: options.clipSources,
    deductions: options.deductions,
    formClaims: new IdempotencyStore(options.db, storeClock),
  };

  await app.register(fastifyCookie);
  await app.register(fastifyFormbody, { bodyLimit: 64 * 1024 });
  await registerCsrfProtection(app, { secureCookies });
  app.decorateRequest('consoleSession', null as never);
  registerConsoleErrorPages(app);

  app.addHook('onSend', async (_request, reply, payload) => {
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    // Pages can hold a key shown once or a revealed secret: never keep them in a cache.
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  await app.register(assetRoutes);
  await app.register(signInRoutes, { context });
  await app.register(accountArea, { context });
  await app.register(operatorRoutes, { context, prefix: '/operator' });
}
