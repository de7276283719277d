import { buildSimulator } from './app.ts';

// The simulator process: `node --import tsx simulator/server.ts`. Loopback by default because
// it accepts any key; set SIMULATOR_HOST=0.0.0.0 inside a container network.
const port = Number(process.env.SIMULATOR_PORT?.trim() || 8090);
const host = process.env.SIMULATOR_HOST?.trim() || '127.0.0.1';
const app = buildSimulator({
  baseUrl: process.env.SIMULATOR_PUBLIC_URL || undefined,
  logger: { level: process.env.LOG_LEVEL?.trim() || 'info' },
  logRequests: process.env.SIMULATOR_LOG_REQUESTS === 'true',
});

let closing = false;
async function shutdown(signal: string): Promise<void> {
  if (closing) return;
  closing = true;
  app.log.info({ signal }, 'simulator shutting down');
  await app.close();
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

const address = await app.listen({ host, port });
app.log.info(`vendor simulator listening on ${address}`);
