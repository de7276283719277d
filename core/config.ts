import { z } from 'zod';
import { parseTrustedProxies } from './trusted-proxies.ts';

/** How long a webhook attempt waits for the receiver (WEBHOOK_TIMEOUT_MS). */
export const DEFAULT_WEBHOOK_TIMEOUT_MS = 15_000;

// Upper bounds for the durations: Node's timers take at most 2^31 - 1 ms and silently fire
// after 1 ms past it (a shutdown grace of 3e9 ms killed the api at once), and nothing here
// needs longer.
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

// Every environment variable the api and worker read, in one place. The README's
// configuration table mirrors this schema; keep them together when either changes.
export const environmentSchema = z.object({
  HOST: z.string().default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  PUBLIC_BASE_URL: z
    .string()
    .url()
    .refine((url) => /^https?:\/\//i.test(url), 'must be an http:// or https:// URL (download links in task JSON and webhooks start with it)')
    .optional(),
  MONGODB_URI: z.string().default('mongodb://127.0.0.1:27027/'),
  MONGODB_DB: z.string().default('framegate'),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('framegate-video-v1'),
  TEMPORAL_UI_URL: z.string().default('http://127.0.0.1:8233'),
  ADMIN_TOKEN: z.string().min(16, 'ADMIN_TOKEN must be at least 16 characters').optional(),
  // When set, /metrics (the api's, and the worker's on WORKER_METRICS_PORT) asks for it as a
  // bearer token: Prometheus sends one with `authorization: {credentials: …}`. Unset, /metrics is
  // open like /healthz, for a port kept off the public internet.
  METRICS_TOKEN: z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional(),
  // The proxies in front of the api whose X-Forwarded-For names the caller (core/trusted-proxies.ts).
  TRUST_PROXY: z
    .string()
    .optional()
    .transform((value, context) => {
      if (value === undefined || value.trim() === '') return undefined;
      try {
        return parseTrustedProxies(value);
      } catch (error) {
        context.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    }),
  CATALOG_FILE: z.string().default('config/catalog.local.json'),
  SIMULATOR_URL: z.string().default('http://127.0.0.1:8090'),
  BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(1_048_576),
  // Chat bodies carry images as base64 data URLs (OpenAI's vision pattern; a phone photo is
  // 3 to 5 MB so encoded): at 1 MiB a single photo was a 413. OpenAI takes images to 20 MB.
  // Only a key holder gets this far (keys are checked before a body is read).
  CHAT_BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(20 * 1_048_576),
  // A request (headers and body) must have arrived within this long, or it is answered 408 and
  // its connection closed: Fastify turns Node's limit off, and a client sending one byte every
  // 20 s held its connection for as long as it liked. A megabyte body in 120 s is 9 KB/s.
  REQUEST_TIMEOUT_MS: z.coerce.number().int().positive().max(HOUR_MS, 'must be at most 3600000 (an hour)').default(120_000),
  // At most 6 hours: polling adds about 4,000 history events an hour, and Temporal terminates a
  // run at 51,200 (and warns from 10,240), which would end a long task as if an operator had.
  VIDEO_TASK_DEADLINE_SECONDS: z.coerce.number().int().positive().max(21_600).default(3600),
  // Taken as at most WEBHOOK_TIMEOUT_MAX_MS (webhookTimeoutMs below).
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(DEFAULT_WEBHOOK_TIMEOUT_MS),
  OUTBOUND_ALLOWLIST: z.string().default(''),
  // DNS servers (`ip`, `ip:port` or `[ipv6]:port`, comma-separated) the api asks for the names in callers' URLs
  // (core/host-names.ts); the system's resolv.conf when empty. Give the ones the vendors and
  // model servers inside the network use, if they differ.
  DNS_SERVERS: z.string().default(''),
  // Finished tasks are deleted this many days after their last write (and their webhook's last
  // attempt), by the worker (worker/task-pruning.ts); 0 keeps them. At least 2: a retry under an
  // Idempotency-Key (kept 24 hours) whose task was gone would submit it anew.
  TASK_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(0)
    .max(36_500)
    .refine((days) => days === 0 || days >= 2, 'must be 0 (keep every task) or at least 2 (Idempotency-Key records outlive a task kept 1 day)')
    .default(0),
  CONSOLE_SESSION_TTL_SECONDS: z.coerce.number().int().positive().default(43_200),
  WEBHOOK_SECRET_GRACE_SECONDS: z.coerce.number().int().min(0).default(86_400),
  // Per key, per UTC minute; operators override them per account or per key (admin API).
  RATE_LIMIT_REQUESTS_PER_MINUTE: z.coerce.number().int().positive().default(3_000),
  RATE_LIMIT_TOKENS_PER_MINUTE: z.coerce.number().int().positive().default(2_000_000),
  // An account's spend lease is given back after this long without chat or image calls; until
  // then its calls reserve in memory (api/services/billing/account-budgets.ts).
  SPEND_LEASE_IDLE_MS: z.coerce.number().int().positive().max(DAY_MS, 'must be at most 86400000 (a day)').default(5_000),
  // ... unless the lease held at most a tenth of the account's free balance: then it is kept this
  // long, so a caller who calls every few seconds or minutes does not wait for a new one.
  SPEND_LEASE_SMALL_IDLE_MS: z.coerce.number().int().positive().max(DAY_MS, 'must be at most 86400000 (a day)').default(300_000),
  // A lease that served calls is replaced (settled: usage records, one capture) this long after
  // it opened: how far a balance read may lag chat spend, against about a dozen store round
  // trips per busy account each time (README, Configuration).
  SPEND_LEASE_MAX_AGE_MS: z.coerce.number().int().positive().max(DAY_MS, 'must be at most 86400000 (a day)').default(5_000),
  // While the key change feed cannot reach the store, keys this process had read stay good this
  // long after its last poll, so calls go on (chat from its spend lease) through a short store
  // outage; a key revoked through another process meanwhile is refused here when the feed
  // reaches the store again, or once this is over. 1000 keeps the one-second bound of a live
  // feed (store/api-key-cache.ts).
  KEY_CACHE_OUTAGE_MS: z.coerce.number().int().min(1_000).max(HOUR_MS, 'must be at most 3600000 (an hour)').default(30_000),
  // When the api closes, chat and image calls still running this long after are ended (503 or
  // a stream's error event, unbilled) so the process settles its leases and exits before an
  // orchestrator kills it (api/services/openai-proxy/calls-in-flight.ts).
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(HOUR_MS, 'must be at most 3600000 (an hour)').default(20_000),
  // The worker's Prometheus listener (GET /metrics); off when the port is unset.
  WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  WORKER_METRICS_HOST: z.string().default('127.0.0.1'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = z.infer<typeof environmentSchema>;

/** Where callers reach the API; used in download links inside task JSON. */
export function publicBaseUrl(config: Config): string {
  // An IPv6 address goes in brackets (http://[::1]:8080), or the URL means something else.
  const host = config.HOST.includes(':') && !config.HOST.startsWith('[') ? `[${config.HOST}]` : config.HOST;
  return (config.PUBLIC_BASE_URL ?? `http://${host}:${config.PORT}`).replace(/\/$/, '');
}

/** One webhook attempt runs as an activity the workflow gives 45 s (workflows/video-task.ts),
 * which must also cover connecting and recording the attempt on the task: a longer timeout
 * would be cut short there, and the attempt go unrecorded. */
export const WEBHOOK_TIMEOUT_MAX_MS = 30_000;

/** The webhook timeout the worker uses: WEBHOOK_TIMEOUT_MS, or at most WEBHOOK_TIMEOUT_MAX_MS,
 * saying so through `warn` (a configuration from before the cap still starts). */
export function webhookTimeoutMs(config: Pick<Config, 'WEBHOOK_TIMEOUT_MS'>, warn: (message: string) => void): number {
  if (config.WEBHOOK_TIMEOUT_MS <= WEBHOOK_TIMEOUT_MAX_MS) return config.WEBHOOK_TIMEOUT_MS;
  warn(`WEBHOOK_TIMEOUT_MS=${config.WEBHOOK_TIMEOUT_MS} is above the ${WEBHOOK_TIMEOUT_MAX_MS} a webhook attempt allows; using ${WEBHOOK_TIMEOUT_MAX_MS}`);
  return WEBHOOK_TIMEOUT_MAX_MS;
}

export function loadConfig(environment: NodeJS.ProcessEnv = process.env): Config {
  // A variable set to nothing (`HOST=` in a compose file or a shell) means unset, as the README
  // reads it: not a HOST of '' (every interface) nor a port or grace of 0.
  const given = Object.fromEntries(Object.entries(environment).filter(([, value]) => value !== undefined && value.trim() !== ''));
  const parsed = environmentSchema.safeParse(given);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`Invalid configuration: ${problems.join('; ')}`);
  }
  return parsed.data;
}
