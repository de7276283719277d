import { existsSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';

// What `npm start` checks before it starts anything, so a mistake is one clear line instead of
// a stack that half starts: its ports are numbers and free, and no other stack runs on the same
// .data/ (two FerretDBs and two Temporal servers on one set of files: each worker then took the
// other stack's tasks to the wrong simulator, and they failed).

export class StackRefusal extends Error {}

/** A port from the environment: its value, or the default when unset. */
export function portFrom(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const port = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new StackRefusal(`${name} must be a port number from 1 to 65535, got '${text}'.`);
  }
  return port;
}

/** Refuses two of the stack's variables on one port: each would look free on its own, then the
 * second to start fails, or the api's port answers for the simulator. */
export function assertDistinctPorts(ports: Array<[number, string]>): void {
  const taken = new Map<number, string>();
  for (const [port, variable] of ports) {
    const other = taken.get(port);
    if (other) throw new StackRefusal(`${other} and ${variable} are both ${port}: give each its own port.`);
    taken.set(port, variable);
  }
}

/** Refuses when something already listens on host:port (named `variable` in the message). */
export async function assertPortFree(host: string, port: number, variable: string): Promise<void> {
  const error = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    const server = createServer();
    server.once('error', (listenError: NodeJS.ErrnoException) => resolve(listenError));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(null)));
  });
  if (!error) return;
  if (error.code === 'EADDRINUSE') throw new StackRefusal(`port ${port} (${variable}) is already in use on ${host}: stop what listens there, or set ${variable} to another port.`);
  if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND') throw new StackRefusal(`cannot listen on ${host}:${port} (${variable}): ${error.code}; check HOST.`);
  throw error;
}

/** A process's command line, or null when there is no such process (or no /proc to ask). */
function commandLine(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return null;
  }
}

/** Whether `pid` is a live `npm start` (scripts/start.ts): after a reboot or in a container a
 * stale pid may belong to something else entirely. Without /proc, any live process counts. */
function isStackProcess(pid: number): boolean {
  if (existsSync('/proc/self/cmdline')) return commandLine(pid)?.includes('scripts/start.ts') ?? false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The variable `npm start` gives its api, worker and simulator: which .data/ their stack runs
 * on, so a later start finds them when that stack was killed with SIGKILL (their command lines
 * name no file of it, and tests run the same entry points from the same checkout). */
export const STACK_DATA_VARIABLE = 'FRAMEGATE_STACK_DATA';

/** Whether `pid`'s environment holds `entry` (NAME=value); false when it cannot be read. */
function environmentHas(pid: number, entry: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(entry);
  } catch {
    return false;
  }
}

/** Processes still running on `dataDir` (an engine, the api, worker or simulator whose stack was
 * killed with SIGKILL lives on in its own process group): their pids, from /proc. */
function processesOn(dataDir: string): number[] {
  if (!existsSync('/proc/self/cmdline')) return [];
  const files = [path.join(dataDir, 'ferretdb'), path.join(dataDir, 'temporal.db')];
  const marker = `${STACK_DATA_VARIABLE}=${dataDir}`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const line = commandLine(Number(entry));
    if (line === null) continue;
    if (files.some((file) => line.includes(file)) || environmentHas(Number(entry), marker)) pids.push(Number(entry));
  }
  return pids;
}

/** The pid of the stack that holds `file` and still runs, if one does. */
function runningHolder(file: string): number | undefined {
  let holder: number;
  try {
    holder = Number(readFileSync(file, 'utf8').trim());
  } catch {
    return undefined;
  }
  return Number.isInteger(holder) && holder > 0 && holder !== process.pid && isStackProcess(holder) ? holder : undefined;
}

function alreadyRunning(holder: number, file: string): StackRefusal {
  return new StackRefusal(
    `a stack is already running from this checkout (pid ${holder}, ${path.relative(process.cwd(), file) || file}): it uses the same .data/. Stop it first (Ctrl-C there, or kill ${holder}), or run a second stack from another clone.`,
  );
}

/**
 * Takes `<dataDir>/stack.pid` for this process until it exits; refuses when a live `npm start`
 * holds it, or when an engine of an earlier stack still runs on the same files. A file left by
 * a stack that died (its process gone, or its pid now another program's) is taken over.
 */
export function lockDataDir(dataDir: string): void {
  const file = path.join(dataDir, 'stack.pid');
  // A running stack first: its own store and Temporal run on these files too, and must not be
  // named as leftovers to kill.
  const running = runningHolder(file);
  if (running !== undefined) throw alreadyRunning(running, file);
  const orphans = processesOn(dataDir);
  if (orphans.length > 0) {
    throw new StackRefusal(
      `processes of an earlier stack still run on ${path.relative(process.cwd(), dataDir) || dataDir} (pid ${orphans.join(', ')}: its store, Temporal, api, worker or simulator, left behind when it was killed): stop them first (kill ${orphans.join(' ')}).`,
    );
  }
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx' });
      process.on('exit', () => {
        try {
          if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
        } catch {
          // Already gone.
        }
      });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    // Taken meanwhile, or a lock left by a stack that is gone.
    const holder = runningHolder(file);
    if (holder !== undefined) throw alreadyRunning(holder, file);
    unlinkSync(file);
  }
  throw new StackRefusal(`could not take ${file}; remove it and try again.`);
}

/** A connection string as it may be printed: a password in it is masked. */
export function withoutPassword(uri: string): string {
  return uri.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/]*):[^@/]*@/i, '$1:***@');
}

/** Where to reach a server listening on `host` from this machine: a wildcard means loopback. */
export function connectHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '::1';
  return host.replace(/^\[(.*)\]$/, '$1');
}

/** `host` as a URL's authority writes it: an IPv6 address in brackets. */
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
