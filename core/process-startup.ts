// How the api and the worker start: a mistake in their settings is one line and exit code 1
// (not a stack trace), and a store or Temporal that is not up yet is waited for, with a line
// per try, rather than ended on: under docker compose or an orchestrator the process often
// starts before its dependencies answer, and exiting then left it down for good.

/** Runs `read` (configuration, the catalog); on a failure prints `what` and the reason, and exits 1. */
export function settingsOrExit<T>(processName: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    process.stderr.write(`framegate ${processName}: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 5_000;

/** `connect()` until it succeeds, waiting longer each time (up to 5 s), one line per failure. */
export async function untilConnected<T>(processName: string, what: string, connect: () => Promise<T>, sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))): Promise<T> {
  let delay = FIRST_DELAY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect();
    } catch (error) {
      const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
      process.stderr.write(`framegate ${processName}: waiting for ${what} (try ${attempt}: ${reason}); trying again in ${(delay / 1000).toFixed(1)} s\n`);
      await sleep(delay);
      delay = Math.min(MAX_DELAY_MS, delay * 2);
    }
  }
}
