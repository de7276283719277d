import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import { VerbatimInteger } from '../../core/verbatim-integers.ts';
import { lastSignOfLife, type IdempotencyRecord, type IdempotencyStore } from '../../store/idempotency.ts';
import type { CallsInFlight } from '../services/openai-proxy/calls-in-flight.ts';
import { principalOf } from './api-key-auth.ts';
import { LaterRecordWrites } from './idempotency-later-writes.ts';
import { TIMED_OUT, withinWait } from '../services/rate-limits/store-wait.ts';

// `Idempotency-Key` on the POST routes that create something billable. Scoped per API key and
// kept 24 hours (store/idempotency.ts): the same key and body get the first answer again
// (marked `idempotent-replayed: true`) and create nothing; a different body is a 422; a
// duplicate while the first still runs is a 409. Only successful answers are kept: after a
// refusal (say 403 for the balance) the caller fixes the cause and retries under the same key.
//
// While its request runs, the record is refreshed every `staleAfterMs` / 3, so a duplicate of a
// slow request (an image model taking minutes) is a 409 however long it takes. A record whose
// request died with its process (or whose refusal could not be forgotten, the store being down)
// stays `in_flight` and is no longer refreshed. `staleAfterMs` after its last refresh a retry
// asks `recover` whether the work got done (a video task exists under the record's task id) and
// replays that; otherwise it takes the record over and runs the request again, under the same
// task id or a new one. An error answer after which the work may still happen (outcomeUnknown)
// leaves its record in flight the same way, so a retry recovers rather than runs again.

/** What a retry of an abandoned first attempt does. */
export type Recovery =
  /** The work was done: answer as the first attempt would have. */
  | { replay: { statusCode: number; body: string } }
  /** Nothing was created: run again under the record's task id (a late twin would collide). */
  | { rerun: 'same-task' }
  /** The first attempt's task exists but was closed unbilled: run again under a new task id. */
  | { rerun: 'new-task' };

export interface IdempotentRoute {
  /** How long after its last refresh an in-flight record counts as abandoned. */
  staleAfterMs: number;
  recover?: (record: IdempotencyRecord, request: FastifyRequest) => Promise<Recovery>;
  /** Throws the refusal the route would answer at once, before doing anything (a video
   * submission whose account's hold queue is stalled). A key without a record is then refused
   * here, before it is claimed: a claim refused afterwards is a record inserted and deleted,
   * two store writes per refused attempt, which under a burst of retries kept a slow store
   * slower (a chaos review counted 1,383 such deletes in two minutes). A key with a record goes
   * on as always: its answer is replayed, or its attempt in flight answers 409, whatever the
   * queue. */
  refuseBeforeClaim?: (request: FastifyRequest) => void;
}

/** Errors whose request may still have its effect (a video task whose start Temporal may have
 * recorded after all): answered, they leave their key's record in flight instead of letting it
 * go, so a retry is a 409 until the record goes stale and then asks the route's `recover`. */
const unknownOutcomes = new WeakSet<Error>();

/** Marks an error answer after which the request's work may still happen (see unknownOutcomes). */
export function outcomeUnknown<E extends Error>(error: E): E {
  unknownOutcomes.add(error);
  return error;
}

interface IdempotentRequest {
  recordId: string;
  /** When this attempt claimed or took over the record: its writes touch only that claim. */
  claimedAt: Date;
  /** The task id a video submission under this key must use. */
  taskId: string;
  finished: boolean;
  /** Its answer is an error after which the work may still happen: the record is left in flight. */
  outcomeUnknown: boolean;
  /** Refreshes the record until the request is finished. */
  refresher: NodeJS.Timeout;
  /** The refresh on its way to the store, if any. */
  refreshing?: Promise<void>;
}

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: IdempotentRequest | null;
  }
}

const HEADER = 'idempotency-key';

/** Refreshes per stale window: one lost or late (a slow store) still leaves two before a retry
 * would take a running request's record over. */
const REFRESHES_PER_STALE_WINDOW = 3;

/** When a duplicate should come back. A record refreshed lately belongs to a request still
 * running, which may end any moment: a second. One silent past a refresh or two was most
 * likely cut off with its process: the time until a retry may take it over (stale). */
export function retryAfterSeconds(staleAfterMs: number, silentMs: number): number {
  const alive = silentMs < (2 * staleAfterMs) / REFRESHES_PER_STALE_WINDOW;
  return alive ? 1 : Math.max(1, Math.ceil((staleAfterMs - silentMs) / 1000));
}

/** How long a route's refusal before the claim waits for a look at the key's record. */
const REFUSAL_LOOKUP_MS = 250;
/** What an Idempotency-Key may be; the OpenAPI document shows the same pattern. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** JSON with object keys sorted, so key order does not make two equal bodies differ. */
export function canonicalJson(value: unknown): string {
  // As written, not as its stand-in in JSON text, which differs between processes.
  if (value instanceof VerbatimInteger) return value.literal;
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined);
    entries.sort(([first], [second]) => (first < second ? -1 : first > second ? 1 : 0));
    return `{${entries.map(([name, item]) => `${JSON.stringify(name)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function asList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
}

function replay(reply: FastifyReply, answer: { statusCode: number; contentType?: string; body: string }): FastifyReply {
  return reply
    .status(answer.statusCode)
    .header('idempotent-replayed', 'true')
    .type(answer.contentType ?? 'application/json; charset=utf-8')
    .send(answer.body);
}

async function idempotencyPlugin(app: FastifyInstance, options: { store: IdempotencyStore; routes: Record<string, IdempotentRoute>; calls?: CallsInFlight }): Promise<void> {
  const { store, routes, calls } = options;
  /** The record writes a close waits for (graceful-close.ts): an answer whose caller left has no
   * connection to keep the close waiting while it is written. */
  const kept = <Written extends Promise<unknown>>(write: Written): Written => {
    calls?.keepAnswerWrite(write);
    return write;
  };
  app.decorateRequest('idempotency', null);
  /** Records the store refused as their request ended, written once it is back. */
  const laterWrites = new LaterRecordWrites();
  app.addHook('onClose', async () => laterWrites.close());

  /** The request now holds the record: refresh it until the request is finished. */
  const hold = (route: IdempotentRoute, request: FastifyRequest, claim: { recordId: string; claimedAt: Date; taskId: string }): IdempotentRequest => {
    const refresh = () => {
      held.refreshing = store
        .refresh(claim.recordId, claim.claimedAt)
        .catch((error: unknown) => request.log.warn({ err: error }, 'could not refresh an Idempotency-Key record'))
        .finally(() => (held.refreshing = undefined));
    };
    // unref: a request cut off mid-way must not keep a closing process alive.
    const refresher = setInterval(refresh, route.staleAfterMs / REFRESHES_PER_STALE_WINDOW).unref();
    const held: IdempotentRequest = { recordId: claim.recordId, claimedAt: claim.claimedAt, taskId: claim.taskId, finished: false, outcomeUnknown: false, refresher };
    return held;
  };

  /** Takes the request's record out of its hands: true the first time only. */
  const finish = (idempotent: IdempotentRequest | null): idempotent is IdempotentRequest => {
    if (!idempotent || idempotent.finished) return false;
    idempotent.finished = true;
    clearInterval(idempotent.refresher);
    return true;
  };

  const claimKey = async (route: IdempotentRoute, request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers[HEADER];
    if (header === undefined) return;
    if (typeof header !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(header)) {
      throw new GatewayError('invalid_request', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces.', 'Idempotency-Key');
    }
    const principal = principalOf(request);
    const id = `${principal.keyId}:${sha256(header)}`;
    const fingerprint = sha256(`${request.routeOptions.url}\n${canonicalJson(request.body)}`);
    try {
      route.refuseBeforeClaim?.(request);
    } catch (refusal) {
      // A read by _id, only when refusing: cheaper than the insert and the delete. The store is
      // likely what stalls the queue: a read it does not answer soon refuses as the queue did
      // (a key with an answer then gets it on the retry).
      const existing = await withinWait(store.find(id).catch(() => null), REFUSAL_LOOKUP_MS);
      if (existing === TIMED_OUT || !existing || existing.expires_at <= store.now()) throw refusal;
    }
    // The store's clock, read once the process has a reading: claims, turns and expiries are
    // judged by it in every process.
    const now = await store.current();
    const claim = await store.claim({ id, fingerprint, taskId: newId('task'), now, route: request.routeOptions.url });
    if (claim.kind === 'contended') {
      throw new GatewayError('conflict', 'Another request with this Idempotency-Key is being started. Retry after it to get its answer.', 'Idempotency-Key', { 'retry-after': '1' });
    }
    const { record } = claim;
    if (claim.kind === 'claimed') {
      request.idempotency = hold(route, request, { recordId: id, claimedAt: now, taskId: record.task_id });
      return;
    }
    if (record.fingerprint !== fingerprint) {
      const elsewhere = record.route !== undefined && record.route !== request.routeOptions.url;
      throw new GatewayError(
        'idempotency_mismatch',
        elsewhere
          ? `This Idempotency-Key was already used on POST ${record.route}, another endpoint. Use a new key for a new request.`
          : 'This Idempotency-Key was already used with a different request body. Use a new key for a new request.',
        'Idempotency-Key',
      );
    }
    if (record.state === 'completed') {
      return replay(reply, { statusCode: record.status_code ?? 200, body: await store.answerOf(record), ...(record.content_type ? { contentType: record.content_type } : {}) });
    }
    const silentMs = now.getTime() - lastSignOfLife(record).getTime();
    if (silentMs < route.staleAfterMs) {
      throw new GatewayError('conflict', 'A request with this Idempotency-Key is still in progress. Retry after it finishes to get its answer.', 'Idempotency-Key', {
        'retry-after': String(retryAfterSeconds(route.staleAfterMs, silentMs)),
      });
    }
    const recovery: Recovery = (await route.recover?.(record, request)) ?? { rerun: 'same-task' };
    if ('replay' in recovery) {
      const recovered = await store.complete(id, record.created_at, { statusCode: recovery.replay.statusCode, contentType: 'application/json; charset=utf-8', body: recovery.replay.body }, 'recover');
      // Not recorded: the silent attempt woke and is ending its claim right now (or a retry took
      // it over). Its ending decides what the key leads to; the caller learns it on a retry.
      if (!recovered) throw new GatewayError('conflict', 'A request with this Idempotency-Key is ending right now. Retry to get its answer.', 'Idempotency-Key', { 'retry-after': '1' });
      return replay(reply, recovery.replay);
    }
    const taskId = recovery.rerun === 'new-task' ? newId('task') : record.task_id;
    if (!(await store.takeOver(id, record.created_at, now, taskId))) {
      // Another retry took the record over a moment ago: it runs now, and answers soon.
      throw new GatewayError('conflict', 'A retry with this Idempotency-Key is already in progress. Retry after it finishes to get its answer.', 'Idempotency-Key', { 'retry-after': '1' });
    }
    request.idempotency = hold(route, request, { recordId: id, claimedAt: now, taskId });
  };

  // The answer goes out even when the store cannot take it: the work is done (an image call is
  // charged), and a caller answered 503 instead would retry into a 409, then, once the record
  // went stale, run and pay for it again. The record is written later, when the store is back.
  const keepAnswer = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const idempotent = request.idempotency;
    const succeeded = reply.statusCode >= 200 && reply.statusCode < 300 && typeof payload === 'string';
    // An answer too long for its record goes in pieces first, while the record is still
    // refreshed: tens of MiB into a slow store must not let a retry take it over meanwhile.
    // A failure here leaves them to the record's write below.
    const pieces = idempotent && !idempotent.finished && succeeded ? await store.keepAnswerPieces(idempotent.recordId, idempotent.claimedAt, payload).catch(() => undefined) : undefined;
    if (!finish(idempotent) || (!succeeded && idempotent.outcomeUnknown)) return payload;
    const { recordId, claimedAt } = idempotent;
    let write: () => Promise<unknown>;
    if (succeeded) {
      const contentType = String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8');
      write = () => store.complete(recordId, claimedAt, { statusCode: reply.statusCode, contentType, body: payload, ...(pieces === undefined ? {} : { pieces }) });
    } else {
      write = () => store.release(recordId, claimedAt);
    }
    try {
      // After a refresh still on its way: on FerretDB an update is an unisolated read-modify-
      // write, and a refresh landing after the answer could write `in_flight` back over it.
      await idempotent.refreshing;
      await write();
    } catch (error) {
      request.log.warn({ err: error }, 'could not write an Idempotency-Key record; the answer goes out and the record is written once the store is back');
      // Kept like the first write: a close (a restart) waits for it, bounded by its force
      // deadline, before the store closes under it.
      void kept(laterWrites.write(write, request.log));
    }
    return payload;
  };

  // A reply that ended without onSend: no answer exists to keep. Not on the caller's leaving
  // itself: a video submission goes on after its caller leaves, and its record must then still
  // lead a retry to the task it creates.
  const releaseUnanswered = async (request: FastifyRequest) => {
    const idempotent = request.idempotency;
    if (!finish(idempotent) || idempotent.outcomeUnknown) return;
    await idempotent.refreshing;
    await store.release(idempotent.recordId, idempotent.claimedAt).catch((error: unknown) => request.log.warn({ err: error }, 'could not release an Idempotency-Key record'));
  };

  // A route that gave its socket up (reply.hijack() once the caller left, as the image route
  // does) answers nothing, and neither onSend nor onResponse runs: its record is released when
  // its handler is done and the connection closed, so the caller's retry runs at once instead
  // of meeting a 409 until the record goes stale.
  const releaseIfGivenUp = (request: FastifyRequest, reply: FastifyReply) => {
    if (!reply.sent || reply.raw.writableEnded) return;
    if (reply.raw.destroyed) void kept(releaseUnanswered(request));
    else reply.raw.once('close', () => void kept(releaseUnanswered(request)));
  };

  // The hooks go on the idempotent routes only: every other route (chat above all) would pay
  // for three hooks that do nothing.
  app.addHook('onRoute', (options) => {
    const route = routes[options.url ?? options.path];
    if (!route || options.method !== 'POST') return;
    options.preHandler = [...asList(options.preHandler), (request, reply) => claimKey(route, request, reply)];
    options.onSend = [...asList(options.onSend), (request: FastifyRequest, reply: FastifyReply, payload: unknown) => kept(keepAnswer(request, reply, payload))];
    options.onResponse = [...asList(options.onResponse), (request: FastifyRequest) => kept(releaseUnanswered(request))];
    options.onError = [
      ...asList(options.onError),
      async (request: FastifyRequest, _reply: FastifyReply, error: Error) => {
        if (request.idempotency && unknownOutcomes.has(error)) request.idempotency.outcomeUnknown = true;
      },
    ];
    // The idempotent routes' handlers are async: the wrapper changes nothing of how they answer.
    const handler = options.handler as (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
    options.handler = async function (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      try {
        return await handler.call(this, request, reply);
      } finally {
        releaseIfGivenUp(request, reply);
      }
    } as typeof options.handler;
  });
}

export const idempotency = fp(idempotencyPlugin, { name: 'idempotency' });
