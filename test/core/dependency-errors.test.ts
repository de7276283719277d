import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MongoBulkWriteError, MongoNetworkError, MongoServerError } from 'mongodb';
import { failureFields, unavailableDependency } from '../../core/dependency-errors.ts';

// Which failures are a dependency's outage (503) rather than a bug (500). The unwrapped socket
// error is the one bench:faults met when the store was killed under load: its message, code and
// the top of its stack are copied from that run's api log.

function droppedSocketError(stack: string): Error {
  const error = Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' });
  error.stack = `Error: This socket has been ended by the other party\n${stack}`;
  return error;
}

test("the driver's unwrapped EPIPE on a connection the store closed is the store's outage", () => {
  const fromDriver = droppedSocketError(
    [
      '    at genericNodeError (node:internal/errors:984:15)',
      '    at wrappedFn (node:internal/errors:538:14)',
      '    at Socket.writeAfterFIN [as write] (node:net:566:14)',
      '    at Connection.writeCommand (/srv/framegate/node_modules/mongodb/src/cmap/connection.ts:722:23)',
      '    at async Connection.sendWire (/srv/framegate/node_modules/mongodb/src/cmap/connection.ts:468:7)',
    ].join('\n'),
  );
  assert.equal(unavailableDependency(fromDriver), 'store');
  assert.equal(unavailableDependency(new Error('a query failed', { cause: fromDriver })), 'store', 'also as a cause');
});

test('the same socket error raised outside the driver is not blamed on the store', () => {
  const elsewhere = droppedSocketError('    at Socket.writeAfterFIN [as write] (node:net:566:14)\n    at streamClip (/srv/framegate/api/routes/video/clip.ts:40:10)');
  assert.equal(unavailableDependency(elsewhere), null);
  assert.equal(unavailableDependency(Object.assign(new Error('boom'), { code: 'EINVAL' })), null);
});

test('driver network errors stay the store outage they were', () => {
  assert.equal(unavailableDependency(new MongoNetworkError('connection reset')), 'store');
});

test("a background loop's failure logs an outage in one line naming it, and anything else with its stack", () => {
  // 40 s of a hung store had the api's lease and limiter loops log 68 stack traces.
  assert.deepEqual(failureFields(new MongoNetworkError('connection timed out')), { dependency: 'store', reason: 'connection timed out' });
  const bug = new TypeError('a bug');
  assert.deepEqual(failureFields(bug), { err: bug });
});

test("a bulk write that failed on the store's connection is the store's outage", () => {
  // How the driver (7.9) throws it: the network error as the bulk error's errorResponse.
  const network = new MongoNetworkError('Connection to 127.0.0.1:58027 interrupted due to server monitor timeout');
  const bulk = new MongoBulkWriteError(network, {} as never);
  assert.equal(bulk.cause, undefined);
  assert.equal(unavailableDependency(bulk), 'store');
  assert.equal(unavailableDependency(new MongoBulkWriteError({ message: 'E11000 duplicate key', code: 11000 }, {} as never)), null, 'a write error is no outage');
});

test("FerretDB's SQLITE_BUSY is the store's outage (a 503 with Retry-After), its other internal errors are not", () => {
  // As FerretDB 1.24 answered an Idempotency-Key claim under a burst of writers (a chaos review).
  const busy = new MongoServerError({
    ok: 0,
    errmsg: '[msg_insert.go:168 handler.(*Handler).MsgInsert] [db.go:134 fsql.(*DB).InTransaction] database is locked (5) (SQLITE_BUSY)',
    code: 1,
    codeName: 'InternalError',
  });
  assert.equal(unavailableDependency(busy), 'store');
  assert.equal(unavailableDependency(new MongoBulkWriteError(busy, {} as never)), 'store', 'also inside a bulk write');
  assert.equal(unavailableDependency(new MongoServerError({ ok: 0, errmsg: 'some other internal error', code: 1, codeName: 'InternalError' })), null);
});
