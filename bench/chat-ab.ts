import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildApi } from '../scripts/lib/build-api.ts';
import { projectRoot, provision, startFerretDb, startTemporalDevServer } from '../scripts/lib/engines.ts';
import { freePort, type ManagedProcess } from '../scripts/lib/processes.ts';
import { compareTurns, FIGURES, figuresOf, SIGNIFICANCE, type BuildFigures, type Measured } from './lib/ab-compare.ts';
import { inTurns, measureLatency, measureStreams, measureThroughput, mergeStreamBlocks, pooled, warmUp } from './lib/chat-sections.ts';
import { startFloor, startFramegate, startUpstream, type FramegateBuild, type Launch } from './lib/chat-targets.ts';
import { mergeLoads, type ChatTarget } from './lib/proxy-load.ts';

// `npm run bench:chat-ab -- [REV[@VAR=value,...] ...]`: is a change to the chat path faster, or
// is it noise? Builds the api at each git revision ('.' is the working tree; default: HEAD and
// '.'; `HEAD@LOG_LEVEL=warn` runs HEAD with that environment on top of the bench's), starts
// each build as its own process on one store beside the direct upstream and the Fastify floor,
// and measures bench:chat's sections 1 to 3 in alternating turns. The first revision runs twice,
// as two processes (the control, A and A'); each other build's turns are tested against the
// control's (bench/lib/ab-compare.ts), and A' against A shows how often the test would call
// identical code changed. Two identical builds read 0.8 ms apart in latency p99 over 12,000
// calls, and 1.2 ms apart in time-to-first-token p99 over 360 streams (bench/NOTES.md):
// a figure from one run of bench:chat cannot tell a change of that size from the machine.
//
// Every revision is built with this tree's node_modules: a revision with other dependencies
// needs them installed first. All traffic stays on 127.0.0.1; every loop is bounded.

const ROUNDS = Number(process.env.BENCH_AB_ROUNDS || 6);
const LATENCY_CALLS = Number(process.env.BENCH_AB_LATENCY_CALLS || 2000);
const THROUGHPUT_SECONDS = Number(process.env.BENCH_AB_THROUGHPUT_SECONDS || 5);
const STREAMS = Number(process.env.BENCH_AB_STREAMS || 40);
const WARM = {
  calls: Number(process.env.BENCH_WARM_CALLS || 6000),
  streams: Number(process.env.BENCH_WARM_STREAMS || 3000),
  seconds: Number(process.env.BENCH_WARM_SECONDS || 15),
};

interface BuildSpec {
  revision: string;
  env: Record<string, string>;
}

/** `REV` or `REV@VAR=value,VAR=value`; a revision may hold an '@' of its own (HEAD@{1}). */
function parseBuildSpec(argument: string): BuildSpec {
  const at = argument.lastIndexOf('@');
  if (at === -1 || !argument.slice(at + 1).includes('=')) return { revision: argument, env: {} };
  const env: Record<string, string> = {};
  for (const pair of argument.slice(at + 1).split(',')) {
    const equals = pair.indexOf('=');
    if (equals < 1) throw new Error(`"${argument}": expected REV@VAR=value[,VAR=value]`);
    env[pair.slice(0, equals)] = pair.slice(equals + 1);
  }
  return { revision: argument.slice(0, at), env };
}

const specs = (process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['HEAD', '.']).map(parseBuildSpec);
const workDir = path.join(projectRoot, `.data/chat-ab-${process.pid}`);
const scratch = mkdtempSync(path.join(tmpdir(), 'framegate-ab-'));
const processes: ManagedProcess[] = [];
const launch: Launch = { processes, scratch };

/** Builds the api of `revision` into the work folder (inside the project, so the bundle's
 * package imports resolve from node_modules). */
async function buildRevision(revision: string): Promise<{ label: string; entry: string }> {
  if (revision === '.') return { label: '. (working tree)', entry: await buildApi({ outfile: path.join(workDir, 'worktree/server.mjs') }) };
  const commit = execFileSync('git', ['rev-parse', '--verify', `${revision}^{commit}`], { cwd: projectRoot, encoding: 'utf8' }).trim();
  const sourceRoot = path.join(workDir, commit, 'src');
  mkdirSync(sourceRoot, { recursive: true });
  execFileSync('sh', ['-c', `git archive ${commit} | tar -x -C "${sourceRoot}"`], { cwd: projectRoot });
  const entry = await buildApi({ sourceRoot, outfile: path.join(workDir, commit, 'server.mjs') });
  return { label: `${revision} (${commit.slice(0, 7)})`, entry };
}

function cell(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

function signed(value: number, digits: number): string {
  return `${value >= 0 ? '+' : ''}${cell(value, digits)}`;
}

let exitCode = 0;
try {
  provision();
  // One bundle per revision, however many environments it runs with.
  const bundles = new Map<string, { label: string; entry: string }>();
  for (const { revision } of specs) if (!bundles.has(revision)) bundles.set(revision, await buildRevision(revision));
  const builds = specs.map(({ revision, env }) => {
    const bundle = bundles.get(revision)!;
    const overrides = Object.entries(env).map(([name, value]) => `${name}=${value}`);
    return { label: overrides.length > 0 ? `${bundle.label} with ${overrides.join(' ')}` : bundle.label, entry: bundle.entry, env };
  });
  const ferretPort = await freePort();
  const temporalPort = await freePort();
  const mongodbUri = process.env.MONGODB_URI || `mongodb://127.0.0.1:${ferretPort}/`;
  const temporalAddress = process.env.TEMPORAL_ADDRESS || `127.0.0.1:${temporalPort}`;
  if (!process.env.MONGODB_URI) processes.push(await startFerretDb({ port: ferretPort, dataDir: path.join(workDir, 'ferretdb') }));
  if (!process.env.TEMPORAL_ADDRESS) processes.push(await startTemporalDevServer({ port: temporalPort }));

  const direct = await startUpstream(launch);
  const floor = await startFloor(launch, 'floor', 'bench/lib/bare-proxy.ts', direct.origin);
  // Target names: A and A' (the control, the first revision twice), then B, C, ...
  const runs: (FramegateBuild & { label: string })[] = [
    { name: 'A', ...builds[0]! },
    { name: "A'", ...builds[0]!, label: `${builds[0]!.label}, again` },
    ...builds.slice(1).map((build, index) => ({ name: String.fromCharCode(66 + index), ...build })),
  ];
  const apis: ChatTarget[] = [];
  for (const run of runs) apis.push(await startFramegate(launch, direct.origin, mongodbUri, temporalAddress, `bench_ab_${process.pid}_${apis.length}`, run));
  const targets = [direct, floor, ...apis];

  console.log(`\nbench:chat-ab: ${ROUNDS} turns each of ${LATENCY_CALLS} calls (concurrency 1), ${THROUGHPUT_SECONDS} s at 50 connections (20 ms upstream), ${STREAMS} streams`);
  for (const run of runs) console.log(`  ${run.name.padEnd(3)} ${run.label}`);
  for (const target of targets) await warmUp(target, WARM);

  const latency = await inTurns(targets, ROUNDS, (target) => measureLatency(target, LATENCY_CALLS, 60));
  const throughput = await inTurns(targets, ROUNDS, (target) => measureThroughput(target, 100_000, THROUGHPUT_SECONDS));
  const streams = await inTurns(targets, ROUNDS, (target) => measureStreams(target, STREAMS, 120));
  const turn = (name: string, round: number): Measured => ({ latency: latency.get(name)![round]!, throughput: throughput.get(name)![round]!, streams: streams.get(name)![round]! });
  // Each build's figures per turn, computed once: the control's serve two comparisons.
  const turnFigures = new Map(runs.map(({ name }) => [name, Array.from({ length: ROUNDS }, (_, round) => figuresOf(turn(name, round), turn('direct', round)))]));
  const pooledLatency = pooled(latency, mergeLoads);
  const pooledThroughput = pooled(throughput, mergeLoads);
  const pooledStreams = pooled(streams, mergeStreamBlocks);
  const all = (name: string): Measured => ({ latency: pooledLatency.get(name)!, throughput: pooledThroughput.get(name)!, streams: pooledStreams.get(name)! });
  const errors = targets.reduce((sum, target) => {
    const { latency: calls, throughput: load, streams: streamed } = all(target.name);
    return sum + calls.errors + load.errors + streamed.load.errors;
  }, 0);

  // The table shows each build's figures over all its turns; the verdicts come from the turns.
  const figures = new Map<string, BuildFigures>([floor, ...apis].map((target) => [target.name, figuresOf(all(target.name), all('direct'))]));
  const control = [...turnFigures.get('A')!, ...turnFigures.get("A'")!];
  const comparisons = [
    { name: "A'", versus: 'A', compared: compareTurns(turnFigures.get('A')!, turnFigures.get("A'")!) },
    ...runs.slice(2).map((run) => ({ name: run.name, versus: 'A, A\'', compared: compareTurns(control, turnFigures.get(run.name)!) })),
  ];
  const header = ['', 'floor', 'A', "A'", ...runs.slice(2).map((run) => run.name), ...comparisons.map(({ name, versus }) => `${name} against ${versus}`)];
  const widths = [22, 8, 8, 8, ...runs.slice(2).map(() => 8), ...comparisons.map(() => 30)];
  const line = (cells: string[]) => cells.map((text, index) => (index === 0 ? text.padEnd(widths[index]!) : text.padStart(widths[index]!))).join(' ');
  console.log(`\n${line(header)}`);
  for (const { name, label, digits } of FIGURES) {
    const cells = [label, ...['floor', ...runs.map((run) => run.name)].map((target) => cell(figures.get(target)![name], digits))];
    for (const { compared } of comparisons) cells.push(`${signed(compared[name].delta, digits)} p=${compared[name].pValue.toFixed(3)} ${compared[name].verdict}`);
    console.log(line(cells));
  }
  console.log(`\nEach verdict compares the mean of per-turn figures (a permutation test; changed below p=${SIGNIFICANCE}).`);
  console.log(`A' against A is identical code: a verdict other than "within noise" there says how far to trust this run. Errors: ${errors}.`);
  if (errors > 0) exitCode = 1;
  await Promise.allSettled(targets.map((target) => target.pool.close()));
} catch (error) {
  exitCode = 1;
  console.error(`[bench:chat-ab] ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  for (const child of processes) {
    const output = child.recentOutput().trim();
    if (output) console.error(`[bench:chat-ab] last output of ${child.name}:\n${output.split('\n').slice(-15).join('\n')}`);
  }
} finally {
  await Promise.allSettled([...processes].reverse().map((child) => child.stop()));
  rmSync(workDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(exitCode);
