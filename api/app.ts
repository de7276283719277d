import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Catalog } from '../core/catalog.ts';
import { publicBaseUrl, type Config } from '../core/config.ts';
import { GatewayError } from '../core/errors.ts';
import { continueAfterChecks } from './plugins/expect-continue.ts';
import { newId } from '../core/ids.ts';
import { parseOutboundAllowlist } from '../core/outbound-guard.ts';
import { HostNameCheck, dnsServers } from '../core/host-names.ts';
import type { TemporalHandle } from '../core/temporal-client.ts';
import { createVendorLookup } from '../core/vendor-lookup.ts';
import { AccountStore } from '../store/accounts.ts';
import { watchAccountChanges } from '../store/api-key-cache.ts';
import { ApiKeyStore } from '../store/api-keys.ts';
import { KeyCreationStore } from '../store/key-creations.ts';
import { BudgetLeaseStore } from '../store/budget-leases.ts';
import { pingDatabase, type Database } from '../store/database.ts';
import { Ledger } from '../store/ledger.ts';
import { StoreClock } from '../store/store-clock.ts';
import { TaskStore } from '../store/tasks.ts';
import { UsageStore } from '../store/usage.ts';
import { openApiDocument } from './openapi/document.ts';
import { adminAuth } from './plugins/admin-auth.ts';
import { FailuresByAddress, type FailureLimit } from '../core/failures-by-address.ts';
import { apiKeyAuth } from './plugins/api-key-auth.ts';
import { answerClientError, answerFrameworkError, errorHandler } from './plugins/error-handler.ts';
import { jsonBody } from './plugins/json-body.ts';
import { metrics } from './plugins/metrics.ts';
import { requestLog } from './plugins/request-log.ts';
import { gracefulClose } from './plugins/graceful-close.ts';
import { batchedStdout } from './log-destination.ts';
import { lazyChildLogger } from './lazy-request-logger.ts';
import { consolePlugin } from './console/plugin.ts';
import { adminRoutes } from './routes/admin/index.ts';
import { adminKeyRoutes } from './routes/admin/keys.ts';
import { chatRoutes } from './routes/chat/index.ts';
import { healthRoutes } from './routes/health/index.ts';
import { imageRoutes } from './routes/images/index.ts';
import { modelIdsWithSlashes, modelRoutes } from './routes/models/index.ts';
import { videoRoutes } from './routes/video/index.ts';
import type { ClipSources } from './services/task-clips.ts';
import { AccountBudgets } from './services/billing/account-budgets.ts';
import { CreditDeductions } from './services/credit-deduction.ts';
import { allowCrossOrigin, crossOriginPreflight, isCrossOriginPath } from './plugins/cross-origin.ts';
import { RateLimiter } from './services/rate-limits/rate-limiter.ts';
import { RateLimitSettings } from './services/rate-limits/limit-settings.ts';
import { limitRequests } from './plugins/rate-limit.ts';
import { idempotency } from './plugins/idempotency.ts';
import { idempotentRoutes } from './routes/idempotent-routes.ts';
import { IdempotencyStore } from '../store/idempotency.ts';
import { adminUsageRoutes } from './routes/admin/usage.ts';
import { adminRateLimitRoutes } from './routes/admin/rate-limits.ts';
import { UsageReports } from '../store/usage-reports.ts';
import { RateLimitBlockStore } from '../store/rate-limit-blocks.ts';
import { accountOverrides } from '../store/rate-limit-overrides.ts';
import { createOpenAiProxies } from './services/openai-proxy/index.ts';
import type { UpstreamClientOptions } from './services/openai-proxy/upstream-client.ts';
import { VideoTaskReads } from './services/video-task-reads.ts';
import { VideoTaskService } from './services/video-tasks.ts';
import { AccountOnboarding } from './services/account-onboarding.ts';
import { KeyCreation } from './services/key-creation.ts';
import { ConsoleCredentialStore } from '../store/console-credentials.ts';

export interface AppDependencies {
  config: Config;
  catalog: Catalog;
  database: Database;
  temporal: TemporalHandle;
  /** Fastify logger options; tests pass false. */
  logger?: boolean | object;
  /** Where the default logger writes (stdout when absent); tests read the lines back. */
  logStream?: { write(line: string): void };
  /** Wrong admin tokens one address may send (OPERATOR_TOKEN_GUESSES when absent): the contract
   * fuzz test's generated requests carry wrong ones by the hundred beside its right ones. */
  adminTokenGuesses?: FailureLimit;
  /** How the chat and image upstreams are called (their retries' pauses, say); tests lengthen a pause
   * to act inside it. */
  upstreamClient?: UpstreamClientOptions;
}

/** A request id a caller may choose: a UUID, a W3C trace id, `req_…`, at most 128 characters. */
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

// Builds the whole HTTP application without listening, so tests drive it with inject() or
// on an ephemeral port, and server.ts only adds the socket.
export async function buildApp(dependencies: AppDependencies): Promise<FastifyInstance> {
  const { config, catalog, database, temporal } = dependencies;
  const app = Fastify({
    logger: dependencies.logger ?? {
      level: config.LOG_LEVEL,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
      stream: dependencies.logStream ?? batchedStdout(),
    },
    bodyLimit: config.BODY_LIMIT_BYTES,
    // request.ip is then the caller's address as the trusted proxies report it (the console's
    // sign-in counts per address).
    ...(config.TRUST_PROXY !== undefined ? { trustProxy: config.TRUST_PROXY } : {}),
    requestTimeout: config.REQUEST_TIMEOUT_MS,
    // Node looks for requests past their time every 30 s by default: a slow request would get
    // up to 30 s more than its limit. And Node 20 times out no request at all when its
    // requestTimeout is below its headersTimeout (60 s), so the latter never exceeds the former.
    // Node answers an HTTP/1.1 request without Host itself (400, empty body): it is let through
    // to the hook below, which answers it in the spec's body.
    http: { connectionsCheckingInterval: 5_000, headersTimeout: Math.min(60_000, config.REQUEST_TIMEOUT_MS), requireHostHeader: false },
    // A caller's own x-request-id (a trace id from its side) is kept when it reads as an id;
    // anything else (8,000 characters, spaces, quotes) would travel into logs, error messages
    // and task records as it came, so the gateway makes its own instead.
    requestIdHeader: false,
    genReqId: (request) => {
      const sent = request.headers['x-request-id'];
      return typeof sent === 'string' && CALLER_REQUEST_ID.test(sent) ? sent : newId('req');
    },
    // Requests arriving during a close get the spec's 503 from api/plugins/graceful-close.ts.
    return503OnClosing: false,
    // Path parameters are checked by the routes, after the key: an id no model or task has is a
    // 404 however long. The router's own limit (default 100 encoded characters) would answer
    // before the key is checked; 16 KB is Node's limit on the request line and headers together,
    // so no parameter reaches it.
    routerOptions: { maxParamLength: 16_384 },
    rewriteUrl: modelIdsWithSlashes,
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    // api/plugins/request-log.ts writes one line per request instead.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
  }).withTypeProvider<ZodTypeProvider>();

  continueAfterChecks(app);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // Only JSON bodies are accepted: text/plain would otherwise reach the validators as a string.
  app.removeContentTypeParser('text/plain');
  // Set on arrival, so every answer carries it, errors included. Hooks on the chat path take a
  // callback instead of returning a promise: one less promise and microtask per hook and call.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (request.headers.origin !== undefined && isCrossOriginPath(request.url)) allowCrossOrigin(reply);
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      // RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request without Host.
      void reply.status(400).send(new GatewayError('invalid_request', 'An HTTP/1.1 request must carry a Host header.').toBody());
      return;
    }
    done();
  });

  const accounts = new AccountStore(database.db);
  const apiKeys = new ApiKeyStore(database.db, config.KEY_CACHE_OUTAGE_MS);
  const tasks = new TaskStore(database.db);
  const ledger = new Ledger(database.db);
  // One reading of the store's time for every record other processes judge by it.
  const storeClock = new StoreClock(database.db);
  const budgets = new AccountBudgets({
    ledger,
    leases: new BudgetLeaseStore(database.db, storeClock),
    usage: new UsageStore(database.db),
    log: app.log,
    timing: { idleMs: config.SPEND_LEASE_IDLE_MS, smallLeaseIdleMs: config.SPEND_LEASE_SMALL_IDLE_MS, maxAgeMs: config.SPEND_LEASE_MAX_AGE_MS },
  });
  // After the server stopped taking requests: settles every spend lease before the store closes.
  app.addHook('onClose', async () => budgets.close());
  app.addHook('onClose', async () => apiKeys.stopWatching());
  const outboundAllowlist = parseOutboundAllowlist(config.OUTBOUND_ALLOWLIST);
  const hostNames = new HostNameCheck(outboundAllowlist, dnsServers(config.DNS_SERVERS));
  const videoTasks = new VideoTaskService({
    catalog,
    tasks,
    ledger,
    accounts,
    temporal: temporal.client,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    deadlineSeconds: config.VIDEO_TASK_DEADLINE_SECONDS,
    outboundAllowlist,
    hostNames,
    budgets,
    log: app.log,
  });

  const limiter = new RateLimiter({
    store: new RateLimitBlockStore(database.db),
    accountOverrides: accountOverrides(database.db),
    defaults: { requestsPerMinute: config.RATE_LIMIT_REQUESTS_PER_MINUTE, tokensPerMinute: config.RATE_LIMIT_TOKENS_PER_MINUTE },
    log: app.log,
  });
  app.addHook('onClose', async () => limiter.close());
  // Account limits changed through another api process (or the console) reach this one with
  // the key change feed, as a key's own limits do, however long the account went unused.
  const stopWatchingAccounts = watchAccountChanges(database.db, (accountId) => limiter.forgetAccount(accountId));
  app.addHook('onClose', async () => void stopWatchingAccounts());
  const openAi = createOpenAiProxies({ catalog, budgets, limiter, ...(dependencies.upstreamClient ? { upstream: dependencies.upstreamClient } : {}) });

  await app.register(requestLog);
  await app.register(gracefulClose, { calls: openAi.calls, graceMs: config.SHUTDOWN_GRACE_MS });
  await app.register(errorHandler);
  await app.register(jsonBody);
  // Before any route: the document is collected from the routes as they are registered.
  await app.register(openApiDocument, { publicBaseUrl: publicBaseUrl(config) });
  await app.register(metrics, { token: config.METRICS_TOKEN });
  await app.register(apiKeyAuth, { apiKeys });
  await app.register(adminAuth, {
    adminToken: config.ADMIN_TOKEN,
    ...(dependencies.adminTokenGuesses ? { wrongTokens: new FailuresByAddress(dependencies.adminTokenGuesses) } : {}),
  });

  await app.register(crossOriginPreflight);
  await app.register(healthRoutes, {
    checks: { database: () => pingDatabase(database), temporal: () => temporal.check() },
  });
  const onboarding = new AccountOnboarding({ accounts, credentials: new ConsoleCredentialStore(database.db) });
  const deductions = new CreditDeductions(accounts, budgets);
  // Without an ADMIN_TOKEN the admin API refuses every request, so no key is created here.
  const keyCreation = new KeyCreation({ apiKeys, creations: new KeyCreationStore(database.db) }, config.ADMIN_TOKEN ?? '');
  await app.register(adminRoutes, { prefix: '/admin', accounts, apiKeys, catalog, onboarding, keyCreation, deductions });
  const rateLimitSettings = new RateLimitSettings({ accounts, apiKeys, limiter });
  await app.register(adminKeyRoutes, { prefix: '/admin', apiKeys, catalog });
  await app.register(adminRateLimitRoutes, { prefix: '/admin', settings: rateLimitSettings });
  await app.register(adminUsageRoutes, { prefix: '/admin', accounts, usageReports: new UsageReports(database.db) });
  const clipSources: ClipSources = { vendorFor: createVendorLookup(catalog), upstreamOf: (modelId) => catalog.find(modelId)?.upstream };
  await app.register(consolePlugin, { prefix: '/console', config, catalog, db: database.db, accounts, apiKeys, tasks, onboarding, rateLimits: rateLimitSettings, clipSources, deductions });
  await app.register(
    async (v1) => {
      v1.addHook('onRequest', v1.requireApiKey);
      v1.addHook('onRequest', limitRequests(limiter));
      await v1.register(idempotency, { store: new IdempotencyStore(database.db, storeClock), routes: idempotentRoutes(tasks, videoTasks), calls: openAi.calls });
      await v1.register(modelRoutes, { catalog });
      await v1.register(videoRoutes, {
        catalog,
        submissions: videoTasks,
        reads: new VideoTaskReads(tasks),
        publicBaseUrl: publicBaseUrl(config),
        ...clipSources,
      });
      await v1.register(chatRoutes, { catalog, chat: openAi.chat, calls: openAi.calls, closeProxies: openAi.close, bodyLimit: config.CHAT_BODY_LIMIT_BYTES, outboundAllowlist, hostNames });
      await v1.register(imageRoutes, { catalog, images: openAi.images, calls: openAi.calls });
    },
    { prefix: '/v1' },
  );

  return app;
}
