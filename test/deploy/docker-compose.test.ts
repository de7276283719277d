import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { environmentSchema, loadConfig } from '../../core/config.ts';
import { WORKER_STOP_MS } from '../../core/video-task.ts';
import { builtApiEntry } from '../../scripts/lib/build-api.ts';

// No Docker engine runs here, so docker-compose.yml is checked against the code instead: it
// parses, every variable it gives the api and worker is one the code reads, the variables
// production must set are set, and every command names a file that exists or that the image builds.

const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as {
  services: Record<string, { command?: string[]; environment?: Record<string, unknown>; build?: string; image?: string; volumes?: string[] }>;
};
const knownVariables = new Set(Object.keys(environmentSchema.shape));
const simulatorVariables = new Set(['SIMULATOR_HOST', 'SIMULATOR_PORT', 'SIMULATOR_PUBLIC_URL']);

describe('docker-compose.yml', () => {
  it('has the production services: MongoDB 7, Temporal with its database and Web UI, api, worker', () => {
    assert.match(compose.services.mongodb?.image ?? '', /^mongo:7/);
    assert.ok(compose.services.temporal?.image?.startsWith('temporalio/'));
    assert.ok(compose.services['temporal-postgresql']);
    assert.ok(compose.services['temporal-ui']?.image?.startsWith('temporalio/ui'));
    assert.equal(compose.services.api?.build, '.');
    assert.equal(compose.services.worker?.build, '.');
  });

  it('turns on Temporal fairness, which the accounts\' fairness keys need, from a file that exists', () => {
    const temporal = compose.services.temporal!;
    const mount = (temporal.volumes ?? []).map((volume) => volume.split(':')).find(([, inside]) => inside === `/etc/temporal/${temporal.environment?.DYNAMIC_CONFIG_FILE_PATH}`);
    assert.ok(mount, `DYNAMIC_CONFIG_FILE_PATH ${temporal.environment?.DYNAMIC_CONFIG_FILE_PATH} is not a mounted file`);
    const settings = parse(readFileSync(mount[0]!, 'utf8')) as Record<string, Array<{ value: unknown }>>;
    assert.deepEqual(settings['matching.enableFairness'], [{ value: true }]);
  });

  it('gives the api and worker only variables the code reads, including the required ones', () => {
    for (const name of ['api', 'worker']) {
      const environment = compose.services[name]!.environment ?? {};
      for (const variable of Object.keys(environment)) assert.ok(knownVariables.has(variable), `${name} sets ${variable}, which core/config.ts does not read`);
      // METRICS_TOKEN: the api's /metrics is on the port compose publishes.
      for (const required of ['MONGODB_URI', 'TEMPORAL_ADDRESS', 'ADMIN_TOKEN', 'METRICS_TOKEN', 'TEMPORAL_TASK_QUEUE']) {
        assert.ok(required in environment, `${name} lacks ${required}`);
      }
    }
  });

  it('restarts the api and worker, and gives callers a reachable address for the simulator\'s clips', () => {
    for (const name of ['api', 'worker']) assert.equal((compose.services[name] as Record<string, unknown>).restart, 'unless-stopped', name);
    const simulator = compose.services.simulator as { environment?: Record<string, string>; ports?: string[] };
    assert.equal(simulator.environment?.SIMULATOR_PUBLIC_URL, '${SIMULATOR_PUBLIC_URL:-http://localhost:8090}');
    assert.deepEqual(simulator.ports, ['127.0.0.1:8090:8090']);
  });

  it('gives a stopping worker longer than its activities may run, and the api longer than its grace', () => {
    const seconds = (name: string) => Number(/^(\d+)s$/.exec(String((compose.services[name] as Record<string, unknown>).stop_grace_period))?.[1]);
    assert.ok(seconds('worker') * 1000 > WORKER_STOP_MS, `worker: ${seconds('worker')} s`);
    assert.ok(seconds('api') * 1000 > loadConfig({}).SHUTDOWN_GRACE_MS + 10_000, `api: ${seconds('api')} s`);
  });

  it('publishes only the api beyond this host: Temporal, its Web UI and the simulator have no authentication', () => {
    const published = Object.entries(compose.services).flatMap(([name, service]) => ((service as { ports?: string[] }).ports ?? []).map((port) => [name, port] as const));
    assert.ok(published.length >= 4, `published: ${published.map(([name, port]) => `${name} ${port}`).join(', ')}`);
    for (const [name, port] of published) {
      if (name === 'api') assert.equal(port, '8080:8080');
      else assert.match(port, /^127\.0\.0\.1:\d+:\d+$/, `${name} publishes ${port} on every interface`);
    }
  });

  it('lets the worker scale (no fixed name or host port)', () => {
    const worker = compose.services.worker as Record<string, unknown>;
    assert.equal(worker.container_name, undefined);
    assert.equal(worker.ports, undefined);
  });

  it('has each worker serve its metrics on the compose network, where a scraper can reach them', () => {
    const environment = compose.services.worker!.environment ?? {};
    assert.equal(environment.WORKER_METRICS_HOST, '0.0.0.0');
    assert.equal(environmentSchema.shape.WORKER_METRICS_PORT.parse(String(environment.WORKER_METRICS_PORT)), 9464);
    // The api's own settings stay shared.
    assert.equal(environment.TEMPORAL_TASK_QUEUE, compose.services.api!.environment?.TEMPORAL_TASK_QUEUE);
  });

  it('runs entry files that exist, and the Dockerfile copies them', () => {
    const dockerfile = readFileSync('Dockerfile', 'utf8');
    for (const [name, service] of Object.entries(compose.services)) {
      if (!service.command || service.build !== '.') continue;
      const entry = service.command.find((part) => /\.m?[jt]s$/.test(part))!;
      if (entry.startsWith('dist/')) {
        // A built entry: the one scripts/lib/build-api.ts writes, built by the Dockerfile.
        assert.equal(path.resolve(entry), builtApiEntry, `${name} runs ${entry}, which no build writes`);
        assert.match(dockerfile, /^RUN node --import tsx scripts\/build\.ts$/m, 'the Dockerfile does not build the api');
      } else {
        assert.ok(existsSync(entry), `${name} runs ${entry}, which does not exist`);
        assert.match(dockerfile, new RegExp(`COPY ${entry.split('/')[0]} `), `the Dockerfile does not copy ${entry.split('/')[0]}/`);
      }
      for (const variable of Object.keys(service.environment ?? {})) {
        assert.ok(knownVariables.has(variable) || simulatorVariables.has(variable), `${name} sets unknown ${variable}`);
      }
    }
  });
});
