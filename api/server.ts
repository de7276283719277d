import { loadCatalog } from '../core/catalog.ts';
import { loadConfig } from '../core/config.ts';
import { exitForSetting, settingsOrExit, untilConnected } from '../core/process-startup.ts';
import { createTemporalHandle } from '../core/temporal-client.ts';
import { connectDatabase } from '../store/database.ts';
import { buildApp } from './app.ts';

// The api process: configuration, connections, listen, and a clean shutdown on SIGINT/SIGTERM.
const config = settingsOrExit('api', () => loadConfig());
const catalog = settingsOrExit('api', () => loadCatalog(config.CATALOG_FILE));
const database = await untilConnected('api', 'the store (MONGODB_URI)', () => connectDatabase(config.MONGODB_URI, config.MONGODB_DB));
const temporal = createTemporalHandle({ address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE });
const app = await buildApp({ config, catalog, database, temporal });

let closing = false;
async function shutdown(signal: string): Promise<void> {
  if (closing) return;
  closing = true;
  app.log.info({ signal }, 'shutting down');
  await app.close();
  await Promise.allSettled([database.close(), temporal.close()]);
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

await app.listen({ host: config.HOST, port: config.PORT }).catch((error: NodeJS.ErrnoException) =>
  exitForSetting('api', `HOST, PORT: cannot listen on ${config.HOST}:${config.PORT} (${error.code ?? error.message})`),
);
