import { unavailableDependency } from './dependency-errors.ts';

// How the api and the worker start: a mistake in their settings is one line and exit code 1
// (not a stack trace), and a store or Temporal that is not up yet is waited for, with a line
// per try, rather than ended on: under docker compose or an orchestrator the process often
// starts before its dependencies answer, and exiting then left it down for good.

/** Ends the process over a setting to fix: one line, exit code 1. */
export function exitForSetting(processName: string, message: string): never {
  process.stderr.write(`framegate ${processName}: ${message}\n`);
  process.exit(1);
}

/** Runs `read` (configuration, the catalog); a failure ends the process (exitForSetting). */
export function settingsOrExit<T>(processName: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    return exitForSetting(processName, error instanceof Error ? error.message : String(error));
  }
}

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 5_000;

/** A failure that waiting may cure: the dependency is not up (yet). Anything else (a malformed
 * MONGODB_URI, wrong credentials, an index conflict) is a setting to fix, not to wait out. */
export function isNotUpYet(error: unknown): boolean {
  if (unavailableDependency(error) !== null) return true;
  // The worker's native connection to Temporal (@temporalio/worker) fails with its own type.
  return error instanceof Error && error.name === 'TransportError';
}

/** `connect()` until it succeeds, waiting longer each time (up to 5 s), one line per failure;
 * a failure waiting cannot cure ends the process as a bad setting does. */
export async function untilConnected<T>(processName: string, what: string, connect: () => Promise<T>, sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))): Promise<T> {
  let delay = FIRST_DELAY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect();
    } catch (error) {
      const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
      if (!isNotUpYet(error)) return exitForSetting(processName, `cannot use ${what}: ${reason}`);
      process.stderr.write(`framegate ${processName}: waiting for ${what} (try ${attempt}: ${reason}); trying again in ${(delay / 1000).toFixed(1)} s\n`);
      await sleep(delay);
      delay = Math.min(MAX_DELAY_MS, delay * 2);
    }
  }
}
