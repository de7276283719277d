import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

// CPU time a process under test spent, from Linux's /proc: what a proxy's work costs, apart from
// how long its calls waited for a core. On a 2-core machine shared by the load generator, the
// upstream and the proxy, latency and throughput mostly measure that waiting. CPU per call is not
// steady either (three runs of bench:chat read Framegate at 1.39×, 1.59× and 1.85× of the
// Fastify floor's, direct's upstream at 67 to 91 µs): compare targets within one run.

/** Clock ticks per second of /proc's times (USER_HZ, 100 on every common Linux build). */
const ticksPerSecond = (() => {
  const answer = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim());
  return Number.isFinite(answer) && answer > 0 ? answer : 100;
})();

function ownTicks(pid: number): number {
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
  return Number(fields[11]) + Number(fields[12]);
}

function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const listed = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    if (listed) children.push(...listed.split(' ').map(Number));
  }
  return children;
}

/** User and system CPU milliseconds of `pid` and its living descendants (a server that forks
 * workers is counted whole); NaN where /proc cannot be read (not Linux, or the process is gone). */
export function processTreeCpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    let ticks = 0;
    const pending = [pid];
    while (pending.length > 0) {
      const next = pending.pop()!;
      ticks += ownTicks(next);
      pending.push(...childrenOf(next));
    }
    return (ticks * 1000) / ticksPerSecond;
  } catch {
    return Number.NaN;
  }
}
