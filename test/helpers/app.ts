import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { loadCatalog } from '../../core/catalog.ts';
import type { FailureLimit } from '../../core/failures-by-address.ts';
import { loadConfig, type Config } from '../../core/config.ts';
import { createTemporalHandle, type TemporalHandle } from '../../core/temporal-client.ts';
import { testDatabase, testTemporalAddress } from './engines.ts';
import type { UpstreamClientOptions } from '../../api/services/openai-proxy/upstream-client.ts';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  database: Awaited<ReturnType<typeof testDatabase>>;
  temporal: TemporalHandle;
  close(): Promise<void>;
}

/** The real API on a database of its own (or `options.database`, shared with another api
 * process and left for its owner to drop), the suite's Temporal server and the local catalog. */
export async function startTestApp(
  label: string,
  overrides: Partial<Record<keyof Config, string>> = {},
  options: { logStream?: { write(line: string): void }; database?: TestApp['database']; adminTokenGuesses?: FailureLimit; upstreamClient?: UpstreamClientOptions } = {},
): Promise<TestApp> {
  const database = options.database ?? (await testDatabase(label));
  const config = loadConfig({
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    TEMPORAL_ADDRESS: testTemporalAddress(),
    MONGODB_DB: database.db.databaseName,
    LOG_LEVEL: 'silent',
    // Tests read settled balances: leases go back a moment after the last call.
    SPEND_LEASE_IDLE_MS: '250',
    SPEND_LEASE_SMALL_IDLE_MS: '250',
    // Tests receive webhooks on this machine, as `npm start` lets them.
    OUTBOUND_ALLOWLIST: 'loopback',
    // Names in callers' URLs are asked of the suite's own DNS server (scripts/test.ts).
    DNS_SERVERS: process.env.DNS_SERVERS ?? '',
    ...overrides,
  });
  const temporal = createTemporalHandle({ address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE });
  const catalog = loadCatalog(config.CATALOG_FILE, { SIMULATOR_URL: config.SIMULATOR_URL });
  // Silent unless the test reads the log itself, through the app's own logger settings.
  const logging = options.logStream ? { logStream: options.logStream } : { logger: false };
  const app = await buildApp({
    config,
    catalog,
    database,
    temporal,
    ...logging,
    ...(options.adminTokenGuesses ? { adminTokenGuesses: options.adminTokenGuesses } : {}),
    ...(options.upstreamClient ? { upstreamClient: options.upstreamClient } : {}),
  });
  await app.ready();
  return {
    app,
    config,
    database,
    temporal,
    async close() {
      await app.close();
      await temporal.close();
      if (!options.database) await database.drop();
    },
  };
}

export const adminHeaders = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

export async function createAccount(app: FastifyInstance, body: { name: string; balance_usd?: number }) {
  const response = await app.inject({ method: 'POST', url: '/admin/accounts', headers: adminHeaders, payload: body });
  if (response.statusCode !== 201) throw new Error(`account creation failed: ${response.statusCode} ${response.body}`);
  return response.json() as { id: string; name: string; balance_usd: number; webhook_secret: string };
}

export async function createKey(app: FastifyInstance, accountId: string, body: { name: string; models?: string[] } = { name: 'test' }) {
  const response = await app.inject({ method: 'POST', url: `/admin/accounts/${accountId}/keys`, headers: adminHeaders, payload: body });
  if (response.statusCode !== 201) throw new Error(`key creation failed: ${response.statusCode} ${response.body}`);
  return response.json() as { id: string; key: string; models: string[] | null };
}

export function bearer(key: string) {
  return { authorization: `Bearer ${key}` };
}
