import { isGrpcServiceError } from '@temporalio/client';
import { MongoNetworkError, MongoOperationTimeoutError, MongoServerError, MongoServerSelectionError } from 'mongodb';

// Which failures mean "a service the gateway depends on is not answering right now" (the store
// or Temporal), as opposed to a bug. Those become 503 service_unavailable, which clients retry
// with backoff (spec section 7); everything else stays a 500 that names only the request id.

/** Server error codes a MongoDB deployment answers while it shuts down, restarts or fails over. */
const TRANSIENT_SERVER_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/** gRPC status codes of a Temporal server that is down, overloaded or did not answer in time. */
const UNAVAILABLE_GRPC_CODES = new Set([
  4, // DEADLINE_EXCEEDED
  8, // RESOURCE_EXHAUSTED
  14, // UNAVAILABLE
]);

export type Dependency = 'store' | 'temporal';

/** Socket failures of a connection the other side has dropped. */
const DROPPED_CONNECTION_CODES = new Set(['EPIPE', 'ECONNRESET']);

// The driver (7.9) lets one socket failure through unwrapped: a command written just after the
// server closed the connection fails with Node's own "This socket has been ended by the other
// party" (EPIPE), not a MongoNetworkError. bench:faults met it while killing the store. Only
// errors raised inside the driver's connection code count, so a dropped socket elsewhere is not
// blamed on the store.
function droppedStoreConnection(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && DROPPED_CONNECTION_CODES.has(code) && /[\\/]mongodb[\\/](?:src|lib)[\\/]cmap[\\/]/.test(error.stack ?? '');
}

// FerretDB's SQLite backend answers a write it could not lock in time (busy_timeout, under a
// burst of concurrent writers) with InternalError, code 1, "database is locked (5)
// (SQLITE_BUSY)": the store is overloaded, not the request wrong. A chaos review saw three 500s
// so, on Idempotency-Key claims and releases.
function storeBusy(error: Error): boolean {
  return error instanceof MongoServerError && error.code === 1 && error.message.includes('SQLITE_BUSY');
}

// A client this process closed itself (MongoTopologyClosedError, MongoNotConnectedError) is not
// an outage of the store but a bug or a shutdown: it stays a 500.
function storeUnavailable(error: Error): boolean {
  return (
    droppedStoreConnection(error) ||
    storeBusy(error) ||
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    error instanceof MongoOperationTimeoutError ||
    (error instanceof MongoServerError && typeof error.code === 'number' && TRANSIENT_SERVER_CODES.has(error.code))
  );
}

function temporalUnavailable(error: unknown): boolean {
  return isGrpcServiceError(error) && UNAVAILABLE_GRPC_CODES.has(error.code);
}

/** The error `error` wraps: its cause, or the driver error a bulk write wraps. */
function wrapped(error: Error): unknown {
  // A bulk write (insertMany, bulkWrite) that failed on the connection throws a
  // MongoBulkWriteError keeping the driver's error as its `errorResponse`, not its cause: a
  // journal write on a hung store logged a stack trace as a bug because of it.
  if (error.cause === undefined && error instanceof MongoServerError && error.errorResponse instanceof Error) return error.errorResponse;
  return error.cause;
}

/** The dependency that is unavailable, when `error` (or an error it wraps) says so; else null. */
export function unavailableDependency(error: unknown): Dependency | null {
  // Temporal's ServiceError wraps the gRPC error as its cause; look a few causes deep.
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = wrapped(current), depth++) {
    if (storeUnavailable(current)) return 'store';
    if (temporalUnavailable(current)) return 'temporal';
  }
  return null;
}

/** A failure's log fields: an outage of the store or Temporal as one line naming it (a
 * background loop fails that way every round while the outage lasts, and its stack traces would
 * bury the log), anything else as the error with its stack, for pino's `err` serialiser. */
export function failureFields(error: unknown): { dependency: Dependency; reason: string } | { err: unknown } {
  const dependency = unavailableDependency(error);
  return dependency ? { dependency, reason: error instanceof Error ? error.message : String(error) } : { err: error };
}
