import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import { loadConfig } from '../../core/config.ts';
import { OPERATOR_TOKEN_GUESSES } from '../../core/failures-by-address.ts';
import { startMetricsServer, type MetricsServer } from '../../worker/metrics-server.ts';
import { createAccount, createKey } from '../helpers/app.ts';
import { parsePrometheusText, sampleSum } from '../helpers/prometheus-text.ts';
import { videoClient } from '../helpers/video-client.ts';
import { waitUntil } from '../helpers/wait-until.ts';
import { clearOfWindowEdge } from '../helpers/window-edge.ts';
import { startVideoStack, type VideoStack } from '../helpers/video-stack.ts';
import { testTemporalAddress, uniqueName } from '../helpers/engines.ts';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { startProcess, waitForOutput } from '../../scripts/lib/processes.ts';
import { setTimeout as pause } from 'node:timers/promises';

// The worker's own /metrics listener: the counters its activities move (a task's way to
// running and succeeded, the money captured) are readable from the worker process itself.

async function workerSamples(server: MetricsServer): Promise<Map<string, number>> {
  const response = await request(server.url);
  assert.equal(response.statusCode, 200);
  assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await response.body.text());
}

describe('worker metrics listener', () => {
  let stack: VideoStack;
  let server: MetricsServer;
  before(async () => {
    stack = await startVideoStack('worker-metrics');
    server = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    await server.close();
    await stack.close();
  });

  it('is off unless WORKER_METRICS_PORT is set', () => {
    assert.equal(loadConfig({}).WORKER_METRICS_PORT, undefined);
    assert.equal(loadConfig({ WORKER_METRICS_PORT: '9464' }).WORKER_METRICS_PORT, 9464);
  });

  it('shows the transitions and the spend of a task the worker ran', async () => {
    const account = await createAccount(stack.app, { name: 'worker-metrics', balance_usd: 10 });
    const client = videoClient(stack.baseUrl, (await createKey(stack.app, account.id)).key);
    const before = await workerSamples(server);
    const submitted = await client.submit({ model: 'sora-2', prompt: 'a paper boat [sim:delay=0]', seconds: '4' });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.json));
    assert.equal((await client.waitForFinal(submitted.json.task_id)).status, 'succeeded');

    // The task reads final once its snapshot is written; the worker counts the transition just
    // after that write returns, so the count can come a moment after the read.
    let after = await workerSamples(server);
    const delta = (name: string, labels: Record<string, string>) => sampleSum(after, name, labels) - sampleSum(before, name, labels);
    await waitUntil(async () => delta('framegate_video_task_transitions_total', { state: 'succeeded', model: 'sora-2' }) > 0 || ((after = await workerSamples(server)), false), 5_000);
    assert.equal(delta('framegate_video_task_transitions_total', { state: 'running', model: 'sora-2' }), 1);
    assert.equal(delta('framegate_video_task_transitions_total', { state: 'succeeded', model: 'sora-2' }), 1);
    // 4 s at sora-2's 100,000 micro-USD per second (config/catalog.local.json).
    assert.equal(delta('framegate_spend_micro_usd_total', { kind: 'video', model: 'sora-2' }), 400_000);
    assert.ok(sampleSum(after, 'process_resident_memory_bytes') > 0, 'process metrics too');
  });

  it('serves nothing but GET /metrics', async () => {
    const other = await request(server.url.replace(/\/metrics$/, '/admin'));
    assert.equal(other.statusCode, 404);
    await other.body.dump();
    const post = await request(server.url, { method: 'POST' });
    assert.equal(post.statusCode, 404);
    await post.body.dump();
  });

  it('asks for METRICS_TOKEN as a bearer token when it is set, and refuses an address past 20 wrong ones', async () => {
    await clearOfWindowEdge(OPERATOR_TOKEN_GUESSES.windowMs, 5_000);
    const guarded = await startMetricsServer({ host: '127.0.0.1', port: 0, token: 'scrape-token-0123456789' });
    try {
      for (const authorization of [undefined, 'Bearer scrape-token-9876543210']) {
        const refused = await request(guarded.url, { headers: authorization === undefined ? {} : { authorization } });
        assert.deepEqual([refused.statusCode, refused.headers['www-authenticate']], [401, 'Bearer']);
        await refused.body.dump();
      }
      const scraped = await request(guarded.url, { headers: { authorization: 'Bearer scrape-token-0123456789' } });
      assert.equal(scraped.statusCode, 200);
      assert.match(await scraped.body.text(), /process_resident_memory_bytes/);
      // 1 wrong so far (no token guesses nothing, and is not counted, however often):
      for (let index = 0; index < 25; index++) {
        const bare = await request(guarded.url);
        assert.equal(bare.statusCode, 401);
        await bare.body.dump();
      }
      // past 20 wrong ones, this address is refused whatever it sends.
      for (let index = 1; index < 20; index++) {
        const refused = await request(guarded.url, { headers: { authorization: `Bearer wrong-${index}-0123456789` } });
        assert.equal(refused.statusCode, 401);
        await refused.body.dump();
      }
      const throttled = await request(guarded.url, { headers: { authorization: 'Bearer scrape-token-0123456789' } });
      assert.equal(throttled.statusCode, 429);
      assert.ok(Number(throttled.headers['retry-after']) >= 1);
      assert.match(await throttled.body.text(), /Too many wrong metrics tokens/);
    } finally {
      await guarded.close();
    }
  });

  it('a worker process with WORKER_METRICS_PORT serves the Temporal SDK\'s metrics beside its own', { timeout: 90_000 }, async () => {
    // Slots and pollers per task queue, schedule-to-start latencies: what tells an operator
    // when to add workers.
    const taskQueue = uniqueName('sdk-metrics');
    const worker = startProcess('worker', process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      env: {
        ...process.env,
        MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
        MONGODB_DB: stack.database.db.databaseName,
        TEMPORAL_ADDRESS: testTemporalAddress(),
        TEMPORAL_TASK_QUEUE: taskQueue,
        WORKER_METRICS_HOST: '127.0.0.1',
        WORKER_METRICS_PORT: '0',
      },
    });
    try {
      await waitForOutput(worker, /worker polling/);
      const url = /worker metrics at (http:\/\/[^"\s]+)/.exec(worker.recentOutput())![1]!;
      let samples = new Map<string, number>();
      for (const started = Date.now(); !(sampleSum(samples, 'temporal_num_pollers', { task_queue: taskQueue, poller_type: 'activity_task' }) > 0); await pause(200)) {
        assert.ok(Date.now() - started < 30_000, `no SDK metrics for ${taskQueue} within 30 s:\n${[...samples.keys()].filter((name) => name.startsWith('temporal_')).slice(0, 20).join('\n')}`);
        const response = await request(url);
        assert.equal(response.statusCode, 200);
        samples = parsePrometheusText(await response.body.text());
      }
      assert.ok(sampleSum(samples, 'temporal_worker_task_slots_available', { task_queue: taskQueue, worker_type: 'ActivityWorker' }) > 0);
      assert.ok(sampleSum(samples, 'process_resident_memory_bytes') > 0, 'the worker\'s own metrics in the same text');
    } finally {
      await worker.stop();
    }
  });

  it('a worker whose TEMPORAL_NAMESPACE the server lacks says so in one line and exits 1', { timeout: 90_000 }, async () => {
    const worker = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      cwd: projectRoot,
      env: {
        ...process.env,
        MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
        MONGODB_DB: uniqueName('no_namespace'),
        TEMPORAL_ADDRESS: testTemporalAddress(),
        TEMPORAL_NAMESPACE: 'no-such-namespace',
        TEMPORAL_TASK_QUEUE: uniqueName('no-namespace'),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    worker.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => worker.on('close', resolve));
    assert.equal(code, 1, stderr);
    assert.match(stderr, /^framegate worker: TEMPORAL_NAMESPACE: Temporal at \S+ has no namespace 'no-such-namespace'/m);
    assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  });

  it('a worker whose WORKER_METRICS_PORT is taken says so in one line and exits 1', { timeout: 90_000 }, async () => {
    const port = new URL(server.url).port;
    const worker = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      cwd: projectRoot,
      env: {
        ...process.env,
        MONGODB_URI: process.env.FRAMEGATE_TEST_MONGODB_URI,
        MONGODB_DB: uniqueName('metrics_port_taken'),
        TEMPORAL_ADDRESS: testTemporalAddress(),
        TEMPORAL_TASK_QUEUE: uniqueName('metrics-port-taken'),
        WORKER_METRICS_HOST: '127.0.0.1',
        WORKER_METRICS_PORT: port,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    worker.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => worker.on('close', resolve));
    assert.equal(code, 1, stderr);
    assert.match(stderr, new RegExp(`^framegate worker: WORKER_METRICS_PORT: cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\)$`, 'm'));
    assert.doesNotMatch(stderr, /^\s+at /m, 'no stack trace');
  });
});
