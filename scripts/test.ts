import { spawn } from 'node:child_process';
import { readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { projectRoot, provision, startFerretDb, startTemporalDevServer, toolPaths } from './lib/engines.ts';
import { freePort, type ManagedProcess } from './lib/processes.ts';
import { startTestDnsServer } from './lib/test-dns-server.ts';

// `npm test`: provision the engines, start ONE FerretDB and ONE Temporal dev server for the
// whole suite (each test file isolates itself with its own database and task queue), run every
// test file with node's test runner, then stop the engines. Node 20 has no global setup hook
// and does not expand globs for .ts files, hence this wrapper.
// Extra arguments select test files: `npm test -- test/api/models.test.ts`.

function findTestFiles(directory: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(directory)) {
    const full = path.join(directory, entry);
    if (statSync(full).isDirectory()) found.push(...findTestFiles(full));
    else if (entry.endsWith('.test.ts')) found.push(path.relative(projectRoot, full));
  }
  return found.sort();
}

const started = Date.now();
provision({ browser: true });
const engines: Array<Pick<ManagedProcess, 'stop'>> = [];
const dataDir = path.join(projectRoot, `.data/test-${process.pid}`);
const stopEngines = async () => {
  await Promise.allSettled(engines.reverse().map((engine) => engine.stop()));
  rmSync(dataDir, { recursive: true, force: true });
};

let exitCode = 1;
try {
  let mongodbUri = process.env.MONGODB_URI;
  if (!mongodbUri) {
    const port = await freePort();
    engines.push(await startFerretDb({ port, dataDir: path.join(dataDir, 'ferretdb') }));
    mongodbUri = `mongodb://127.0.0.1:${port}/`;
  }
  let temporalAddress = process.env.TEMPORAL_ADDRESS;
  if (!temporalAddress) {
    const port = await freePort();
    engines.push(await startTemporalDevServer({ port, onePartition: true }));
    temporalAddress = `127.0.0.1:${port}`;
  }
  // Every process of the run (test files, the stacks they spawn) resolves callers' names here:
  // names that lead inside (`169-254-169-254.nip.test`) and the same answers on every machine.
  const dns = await startTestDnsServer();
  engines.push(dns);
  console.log(`[test] engines ready in ${((Date.now() - started) / 1000).toFixed(1)} s: store ${mongodbUri}, temporal ${temporalAddress}, dns ${dns.address}`);

  const requested = process.argv.slice(2);
  const files = requested.length > 0 ? requested : findTestFiles(path.join(projectRoot, 'test'));
  const runner = spawn(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-reporter=spec', `--test-concurrency=${process.env.TEST_CONCURRENCY || 2}`, ...files],
    {
      cwd: projectRoot,
      stdio: 'inherit',
      env: {
        ...process.env,
        FRAMEGATE_TEST_MONGODB_URI: mongodbUri,
        FRAMEGATE_TEST_TEMPORAL_ADDRESS: temporalAddress,
        FRAMEGATE_TEMPORAL_TEST_SERVER: toolPaths.temporalTestServer,
        FRAMEGATE_TEMPORAL_CLI: toolPaths.temporal,
        DNS_SERVERS: dns.address,
      },
    },
  );
  const forward = (signal: NodeJS.Signals) => runner.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  exitCode = await new Promise<number>((resolve) => runner.on('exit', (code) => resolve(code ?? 1)));
} catch (error) {
  console.error(`[test] ${error instanceof Error ? error.message : String(error)}`);
} finally {
  await stopEngines();
}
console.log(`[test] finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(exitCode);
