import type { CreditDeductions } from '../services/credit-deduction.ts';
import type { FastifyReply } from 'fastify';
import type { Catalog } from '../../core/catalog.ts';
import type { Config } from '../../core/config.ts';
import type { AccountStore, AccountWithLimits } from '../../store/accounts.ts';
import type { ApiKeyStore } from '../../store/api-keys.ts';
import type { ConsoleCredentialStore } from '../../store/console-credentials.ts';
import type { IdempotencyStore } from '../../store/idempotency.ts';
import type { TaskStore } from '../../store/tasks.ts';
import type { UsageReports } from '../../store/usage-reports.ts';
import type { AccountOnboarding } from '../services/account-onboarding.ts';
import type { RateLimitSettings } from '../services/rate-limits/limit-settings.ts';
import type { ClipSources } from '../services/task-clips.ts';
import type { Html } from './html.ts';
import type { ConsoleSessions } from './sessions.ts';
import type { SignInThrottle } from './sign-in-throttle.ts';

// What every console route works with: the same stores and services as the admin API, plus
// the console's own sessions and reports.

export interface ConsoleContext {
  config: Config;
  catalog: Catalog;
  accounts: AccountStore;
  apiKeys: ApiKeyStore;
  tasks: TaskStore;
  credentials: ConsoleCredentialStore;
  onboarding: AccountOnboarding;
  rateLimits: RateLimitSettings;
  usageReports: UsageReports;
  sessions: ConsoleSessions;
  /** Failed sign-ins, counted in the store across api processes. */
  signInThrottle: SignInThrottle;
  publicBaseUrl: string;
  /** Cookies get the Secure attribute when the console is served over https. */
  secureCookies: boolean;
  /** Where finished clips come from (the console streams those only the gateway can fetch). */
  clipSources: ClipSources;
  deductions: CreditDeductions;
  /** One-time claims of forms that must act once (a new key): records of their own kind in the
   * Idempotency-Key store, whose insert is atomic and whose records the sweeper expires. */
  formClaims: IdempotencyStore;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in holder's account (with balance), set by the account area's guard. */
    consoleAccount: AccountWithLimits | null;
    /** The price of the cheapest video task of the catalog (none without video models): the
     * account area's pages warn below it. */
    consoleCheapestVideoMicros: number | undefined;
  }
}

export function sendPage(reply: FastifyReply, page: Html, status = 200): FastifyReply {
  return reply.status(status).type('text/html; charset=utf-8').send(page.text);
}

/** The newest tasks an account page lists; bounded, since FerretDB reads all of the account's
 * tasks to sort them. */
export const LATEST_TASKS_LIMIT = 20;
