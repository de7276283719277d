import { Runtime } from '@temporalio/worker';
import type { Logger } from 'pino';
import { request } from 'undici';
import type { Config } from '../core/config.ts';
import { freePort } from '../core/free-port.ts';
import { sdkLevel, sdkLogger } from './worker-log.ts';

// The Temporal SDK's runtime for the worker process: its log into the worker's (worker-log.ts),
// and, when the worker serves metrics, its own metrics (task slots in use, pollers, workflow and
// activity schedule-to-start latencies, activity failures): the figures that tell an operator
// when to add workers, since the worker and the api scale apart. The SDK's core serves them from
// an HTTP listener of its own; it listens on a loopback port here, and the worker's /metrics
// (metrics-server.ts) appends that text to its own, so one scrape target has both.

/** Installs the Temporal runtime; resolves with the URL of the SDK's metrics when asked for
 * them. Must run before the worker's first Temporal connection. */
export async function installTemporalRuntime(options: { log: Logger; logLevel: Config['LOG_LEVEL']; metrics: boolean }): Promise<string | undefined> {
  const level = sdkLevel(options.logLevel);
  const port = options.metrics ? await freePort() : undefined;
  Runtime.install({
    logger: sdkLogger(options.log, level),
    telemetryOptions: {
      // The core's own entries, forwarded into the same log instead of printed on their own.
      logging: { filter: { core: level, other: 'ERROR' }, forward: {} },
      ...(port === undefined
        ? {}
        : {
            metrics: {
              // Prometheus' own conventions: counters end in _total, durations in seconds.
              prometheus: { bindAddress: `127.0.0.1:${port}`, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true },
            },
          }),
    },
  });
  return port === undefined ? undefined : `http://127.0.0.1:${port}/metrics`;
}

/** The exporter's text, or null when it does not answer (the worker's own metrics are served
 * all the same). */
export async function readTemporalSdkMetrics(url: string): Promise<string | null> {
  try {
    const response = await request(url, { headersTimeout: 2_000, bodyTimeout: 2_000 });
    const text = await response.body.text();
    return response.statusCode === 200 ? text : null;
  } catch {
    return null;
  }
}
