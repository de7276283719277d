import { DefaultLogger, type LogEntry, type LogLevel } from '@temporalio/worker';
import { pino, type Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { unavailableDependency } from '../core/dependency-errors.ts';

// The worker's log: one JSON line per entry on stdout, at LOG_LEVEL, as the api writes its own
// (pino). The Temporal SDK's entries (the workflow bundle's report, worker state changes,
// activity and workflow log calls, and the SDK core's own, forwarded) go through it too: left to
// the SDK they were multi-line text on stderr at INFO whatever LOG_LEVEL said, which line-based
// log shippers split apart.

export function workerLog(level: Config['LOG_LEVEL']): Logger {
  return pino({ level, base: { process: 'worker' } });
}

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' };

/** The SDK's least level worth passing on for LOG_LEVEL (pino drops the rest anyway). */
export function sdkLevel(level: Config['LOG_LEVEL']): LogLevel {
  switch (level) {
    case 'trace':
      return 'TRACE';
    case 'debug':
      return 'DEBUG';
    case 'info':
      return 'INFO';
    case 'warn':
      return 'WARN';
    default:
      return 'ERROR';
  }
}

/** SDK warnings that say what this worker is built to do: passed on at INFO, so an operator
 * who alerts on warnings is not woken at every start. The webhook queue's worker runs
 * activities alone (worker/create-worker.ts). */
const EXPECTED_WARNINGS = new Set(['No workflows registered, not polling for workflow tasks']);

/** An error the SDK passes in an entry's `error` (an activity that failed), as words: pino
 * serialises only `err`, so a driver's error came out as its few enumerable fields, without its
 * name or message. An outage of the store or Temporal is said in one line, without a stack
 * trace: every activity fails the same way then, and its traces would bury the log. */
function readableError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const dependency = unavailableDependency(error);
  if (dependency) return { type: error.name, message: error.message, dependency };
  return pino.stdSerializers.err(error);
}

/** The SDK's logger, writing into `log`. */
export function sdkLogger(log: Logger, level: LogLevel): DefaultLogger {
  return new DefaultLogger(level, (entry: LogEntry) => {
    // pino stamps the line itself: the SDK's own timestamp (at most the 100 ms its forwarding
    // buffers earlier) would make a second `time` key.
    const { meta, message } = entry;
    const passedAs = entry.level === 'WARN' && EXPECTED_WARNINGS.has(message) ? 'info' : PINO_LEVEL[entry.level];
    const fields = meta && 'error' in meta ? { ...meta, error: readableError(meta.error) } : meta;
    log[passedAs]({ sdk: true, ...fields }, message);
  });
}
