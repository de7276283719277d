import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readSync, fstatSync } from 'node:fs';
import { connect } from 'node:net';

// Child-process supervision shared by `npm start` and `npm test`: start a program with its
// output prefixed by a name, wait for its port, and stop it politely (SIGTERM, then SIGKILL).

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
  /** Not yet exited (nor killed by a signal). */
  running(): boolean;
  stop(timeoutMs?: number): Promise<void>;
  /** The last lines the process printed, for error reports. */
  recentOutput(): string;
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** 'inherit-prefixed' copies output to our stdout with a "[name]" prefix; 'quiet' keeps it only for error reports. */
  output?: 'inherit-prefixed' | 'quiet';
  /**
   * Write stdout and stderr straight to this file instead of a pipe we read. Benchmarks use it:
   * a pipe makes our event loop (the load generator's) read every log line of the process under
   * test, and a full pipe makes that process's synchronous log writes wait on us.
   */
  logFile?: string;
  /** How long stop() waits after SIGTERM before SIGKILL, unless it is given one (10 s). */
  stopTimeoutMs?: number;
  /**
   * Start the process in a process group of its own, so a Ctrl-C in the terminal reaches only
   * us and we stop the processes in order (npm start: the api settles its spend leases while
   * the store is still up). The caller must then stop it on every way out (SIGHUP included).
   */
  ownProcessGroup?: boolean;
}

const RECENT_BYTES = 16_384;

/** The last RECENT_BYTES of a log file, for error reports. */
function fileTail(file: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const size = fstatSync(fd).size;
    const length = Math.min(size, RECENT_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString('utf8');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function prefixLines(name: string, sink: NodeJS.WriteStream) {
  let pending = '';
  return (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) sink.write(`[${name}] ${line}\n`);
  };
}

export function startProcess(name: string, command: string, args: string[], options: StartOptions = {}): ManagedProcess {
  const logFd = options.logFile ? openSync(options.logFile, 'a') : undefined;
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: logFd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', logFd, logFd],
    detached: options.ownProcessGroup ?? false,
  });
  // The child holds its own copy of the descriptor.
  if (logFd !== undefined) closeSync(logFd);
  const recent: string[] = [];
  const remember = (chunk: Buffer) => {
    recent.push(chunk.toString('utf8'));
    if (recent.length > 50) recent.shift();
  };
  child.stdout?.on('data', remember);
  child.stderr?.on('data', remember);
  if (options.output === 'inherit-prefixed' && logFd === undefined) {
    child.stdout!.on('data', prefixLines(name, process.stdout));
    child.stderr!.on('data', prefixLines(name, process.stderr));
  }
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : null)));
    child.on('error', (error) => {
      recent.push(String(error));
      resolve(127);
    });
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    name,
    child,
    exited,
    running,
    async stop(timeoutMs = options.stopTimeoutMs ?? 10_000) {
      if (!running()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
    // With a log file there are no pipes, so nothing reaches `recent`.
    recentOutput: () => (options.logFile ? fileTail(options.logFile) : recent.join('')),
  };
}

export { freePort } from '../../core/free-port.ts';

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Waits until the process has printed a line matching `pattern`; fails early if it died. */
export async function waitForOutput(process: ManagedProcess, pattern: RegExp, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void process.exited.then(() => (ended = true));
  while (!pattern.test(process.recentOutput())) {
    if (ended) throw new Error(`${process.name} exited before printing ${pattern}:\n${process.recentOutput()}`);
    if (Date.now() > deadline) throw new Error(`${process.name} did not print ${pattern} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Waits until host:port accepts connections; fails early with the process's output if it died. */
export async function waitForPort(host: string, port: number, process: ManagedProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void process.exited.then(() => (ended = true));
  while (Date.now() < deadline) {
    if (ended) throw new Error(`${process.name} exited before listening on ${host}:${port}:\n${process.recentOutput()}`);
    if (await canConnect(host, port)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${process.name} did not listen on ${host}:${port} within ${timeoutMs} ms:\n${process.recentOutput()}`);
}
