import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { enableProcessMetrics, metricsRegistry } from '../core/metrics.ts';
import { FailuresByAddress, OPERATOR_TOKEN_GUESSES } from '../core/failures-by-address.ts';
import { bearerMatches } from '../core/secret-match.ts';
import { readTemporalSdkMetrics } from './temporal-runtime.ts';

// The worker's own /metrics: task transitions, webhook attempts, vendor errors and video spend
// happen in this process, which has no HTTP server of its own, so a tiny one serves the
// Prometheus text on WORKER_METRICS_PORT (off when unset), followed by the Temporal SDK's own
// (temporal-runtime.ts). Nothing else is served. With `token` (METRICS_TOKEN) set, a scrape must
// send it as a bearer token.

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

export async function startMetricsServer(options: { host: string; port: number; temporalSdkMetricsUrl?: string; token?: string }): Promise<MetricsServer> {
  enableProcessMetrics();
  const { temporalSdkMetricsUrl } = options;
  const collect = async () => {
    if (temporalSdkMetricsUrl === undefined) return metricsRegistry.metrics();
    const [own, sdk] = await Promise.all([metricsRegistry.metrics(), readTemporalSdkMetrics(temporalSdkMetricsUrl)]);
    return sdk === null ? own : `${own}\n${sdk}`;
  };
  const wrongTokens = new FailuresByAddress(OPERATOR_TOKEN_GUESSES);
  const server = createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Only GET /metrics is served here.\n');
      return;
    }
    if (options.token !== undefined) {
      const address = request.socket.remoteAddress ?? '';
      // No token guesses nothing, and is not counted (the api's admin-auth.ts).
      const waitSeconds = request.headers.authorization === undefined ? 0 : wrongTokens.admit(address);
      if (waitSeconds > 0) {
        response.writeHead(429, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': String(waitSeconds) }).end(`Too many wrong metrics tokens from this address; retry in ${waitSeconds} s.\n`);
        return;
      }
      if (!bearerMatches(request.headers.authorization, options.token)) {
        response.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'www-authenticate': 'Bearer' }).end('Missing or invalid metrics token (Authorization: Bearer <METRICS_TOKEN>).\n');
        return;
      }
      wrongTokens.forgive(address);
    }
    collect().then(
      (text) => response.writeHead(200, { 'content-type': metricsRegistry.contentType }).end(text),
      () => response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Metrics could not be collected.\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
