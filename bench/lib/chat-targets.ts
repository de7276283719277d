import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { apiRunArgs, buildApi } from '../../scripts/lib/build-api.ts';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { freePort, startProcess, waitForPort, type ManagedProcess } from '../../scripts/lib/processes.ts';
import { chatTarget, complete, type ChatTarget } from './proxy-load.ts';

// The processes bench/chat-proxy.ts measures, each started on a free loopback port: the
// loopback upstream (direct), the two floors, Framegate (built, on the bench's store and
// Temporal) and the LiteLLM proxy. Each writes its output to a file in the run's scratch
// folder (chat-proxy.ts says why not to a pipe), and is added to `processes` to be stopped.

export interface Launch {
  /** Every process started, in order; the bench stops them in reverse. */
  processes: ManagedProcess[];
  /** The run's temporary folder: logs and LiteLLM's config. */
  scratch: string;
}

const ADMIN_TOKEN = 'bench-admin-token-0123456789';

/** Child environments without proxy settings: every call in this bench is loopback. */
function loopbackEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost', ...extra };
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy']) delete env[name];
  return env;
}

const logFile = (launch: Launch, name: string) => path.join(launch.scratch, `${name.replace(/\W+/g, '-')}.log`);

export async function startUpstream(launch: Launch): Promise<ChatTarget> {
  const port = await freePort();
  const upstream = startProcess('upstream', process.execPath, ['--import', 'tsx', 'bench/lib/loopback-upstream.ts'], {
    cwd: projectRoot,
    env: loopbackEnv({ PORT: String(port) }),
    logFile: logFile(launch, 'upstream'),
  });
  launch.processes.push(upstream);
  await waitForPort('127.0.0.1', port, upstream);
  return chatTarget('direct', `http://127.0.0.1:${port}`, { pid: upstream.child.pid });
}

/** A bare proxy (bench/lib/bare-*.ts) in its own process: what the stack costs alone. */
export async function startFloor(launch: Launch, name: string, script: string, upstreamUrl: string): Promise<ChatTarget> {
  const port = await freePort();
  const floor = startProcess(name, process.execPath, ['--import', 'tsx', script], {
    cwd: projectRoot,
    env: loopbackEnv({ PORT: String(port), UPSTREAM_URL: upstreamUrl }),
    logFile: logFile(launch, name),
  });
  launch.processes.push(floor);
  await waitForPort('127.0.0.1', port, floor);
  return chatTarget(name, `http://127.0.0.1:${port}`, { pid: floor.child.pid });
}

export interface FramegateBuild {
  /** The target's name in reports, and its log file's. */
  name: string;
  /** A bundle made by buildApi(); by default this tree is built into dist/api/server.mjs. */
  entry: string;
  /** Environment of this api process over the bench's own (LOG_LEVEL, say). */
  env?: Record<string, string>;
}

export async function startFramegate(
  launch: Launch,
  upstreamUrl: string,
  mongodbUri: string,
  temporalAddress: string,
  database: string,
  build?: FramegateBuild,
): Promise<ChatTarget> {
  const name = build?.name ?? 'Framegate';
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  // BENCH_PROFILE_DIR=dir writes a V8 CPU profile of the api process there when it exits
  // (Node refuses --cpu-prof in NODE_OPTIONS, so it has to be passed here).
  const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  // As production runs it: from its build, not under tsx (scripts/lib/build-api.ts says why).
  const entry = build?.entry ?? (await buildApi());
  // API_NODE_ARGS in a build's environment (`HEAD@API_NODE_ARGS=--single-threaded-gc`, say):
  // node flags for that api process, for an A/B of a runtime setting (V8 takes few of them
  // from NODE_OPTIONS).
  const nodeArgs = (build?.env?.API_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const api = startProcess(name, process.execPath, [...profile, ...nodeArgs, ...apiRunArgs(entry)], {
    cwd: projectRoot,
    env: loopbackEnv({
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_BASE_URL: origin,
      MONGODB_URI: mongodbUri,
      MONGODB_DB: database,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_TASK_QUEUE: `bench-chat-${process.pid}`,
      ADMIN_TOKEN,
      CATALOG_FILE: 'config/catalog.local.json',
      // The local catalog's OpenAI upstream is ${SIMULATOR_URL}/v1: the loopback upstream.
      SIMULATOR_URL: upstreamUrl,
      LOG_LEVEL: process.env.BENCH_FRAMEGATE_LOG_LEVEL || 'info',
      // Limits are still counted on every request (the cost is measured), just never reached.
      RATE_LIMIT_REQUESTS_PER_MINUTE: '100000000',
      RATE_LIMIT_TOKENS_PER_MINUTE: '1000000000',
      ...build?.env,
    }),
    logFile: logFile(launch, name),
  });
  launch.processes.push(api);
  await waitForPort('127.0.0.1', port, api);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const accountResponse = await request(`${origin}/admin/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'bench', balance_usd: 1_000_000 }) });
  const account = (await accountResponse.body.json()) as { id: string };
  const keyResponse = await request(`${origin}/admin/accounts/${account.id}/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'bench' }) });
  const { key } = (await keyResponse.body.json()) as { key: string };
  if (!key) throw new Error('Framegate: no key was created');
  return chatTarget(name, origin, { key, pid: api.child.pid });
}

/** `count` more funded accounts with a key each, sharing `framegate`'s connection pool: the
 * throughput run repeated with the calls spread over accounts shows what the per-account
 * serialized ledger costs at 50 concurrent calls of ONE account. */
export async function framegateAccounts(framegate: ChatTarget, count: number): Promise<ChatTarget[]> {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  const spread: ChatTarget[] = [];
  for (let index = 0; index < count; index++) {
    const accountResponse = await request(`${framegate.origin}/admin/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ name: `bench-${index}`, balance_usd: 1_000_000 }) });
    const account = (await accountResponse.body.json()) as { id: string };
    const keyResponse = await request(`${framegate.origin}/admin/accounts/${account.id}/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'bench' }) });
    const { key } = (await keyResponse.body.json()) as { key: string };
    spread.push({ ...framegate, name: `Framegate, ${count} accounts`, headers: { ...framegate.headers, authorization: `Bearer ${key}` } });
  }
  return spread;
}

export async function startLiteLlm(launch: Launch, upstreamUrl: string): Promise<ChatTarget | string> {
  const provisioned = spawnSync('bash', [path.join(projectRoot, 'scripts/provision-bench.sh')], {
    stdio: ['ignore', 'inherit', 'pipe'],
    timeout: 20 * 60_000,
  });
  const provisionErrors = provisioned.stderr?.toString('utf8') ?? '';
  process.stderr.write(provisionErrors);
  if (provisioned.status !== 0) {
    const detail = provisioned.error?.message ?? provisionErrors.trim().split('\n').slice(-3).join(' | ');
    return `scripts/provision-bench.sh failed (exit ${provisioned.status}): ${detail}`;
  }
  const binary = path.join(projectRoot, '.tools/bench-venv/bin/litellm');
  if (!existsSync(binary)) return `${binary} is missing after provisioning`;
  const config = path.join(launch.scratch, 'litellm.yaml');
  writeFileSync(
    config,
    [
      'model_list:',
      '  - model_name: gpt-4o-mini',
      '    litellm_params:',
      '      model: openai/gpt-4o-mini',
      `      api_base: ${upstreamUrl}/v1`,
      '      api_key: bench-upstream-key',
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const env = loopbackEnv({
    // Offline: the model cost map from the package, no telemetry; and no database.
    LITELLM_LOCAL_MODEL_COST_MAP: 'True',
    LITELLM_TELEMETRY: 'False',
  });
  delete env.DATABASE_URL;
  const litellm = startProcess('litellm', binary, ['--config', config, '--host', '127.0.0.1', '--port', String(port)], { cwd: launch.scratch, env, logFile: logFile(launch, 'litellm') });
  launch.processes.push(litellm);
  try {
    await waitForPort('127.0.0.1', port, litellm, 180_000);
    const target = chatTarget('LiteLLM', `http://127.0.0.1:${port}`, { pid: litellm.child.pid });
    await complete(target, 'hello');
    return target;
  } catch (error) {
    await litellm.stop();
    const message = error instanceof Error ? error.message : String(error);
    return message.split('\n').filter(Boolean).slice(-6).join(' | ');
  }
}
