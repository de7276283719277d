import { destination } from 'pino';

// Where the api's log lines go: stdout, in batches of 4 KiB, or every 250 ms when fewer come.
// One write per line (pino's default) cost the chat proxy about a tenth of its CPU per call, in
// the system call or in waking a thread for it. pino writes whatever is left when the process
// exits (process.exit included), so a clean stop or a crash loses no line; a SIGKILL can lose
// the last 250 ms.
export function batchedStdout() {
  return destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 250 });
}
