import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../../core/errors.ts';
import { newId } from '../../core/ids.ts';
import type { IdempotencyRecord, IdempotencyStore } from '../../store/idempotency.ts';
import { principalOf } from './api-key-auth.ts';

// `Idempotency-Key` on the POST routes that create something billable. Scoped per API key and
// kept 24 hours (store/idempotency.ts): the same key and body get the first answer again
// (marked `idempotent-replayed: true`) and create nothing; a different body is a 422; a
// duplicate while the first still runs is a 409. Only successful answers are kept: after a
// refusal (say 403 for the balance) the caller fixes the cause and retries under the same key.
//
// A record whose request died with its process (or whose refusal could not be forgotten, the
// store being down) stays `in_flight`. After `staleAfterMs` a retry asks `recover` whether the
// work got done (a video task exists under the record's task id) and replays that; otherwise it
// takes the record over and runs the request again, under the same task id or a new one.

/** What a retry of an abandoned first attempt does. */
export type Recovery =
  /** The work was done: answer as the first attempt would have. */
  | { replay: { statusCode: number; body: string } }
  /** Nothing was created: run again under the record's task id (a late twin would collide). */
  | { rerun: 'same-task' }
  /** The first attempt's task exists but was closed unbilled: run again under a new task id. */
  | { rerun: 'new-task' };

export interface IdempotentRoute {
  staleAfterMs: number;
  recover?: (record: IdempotencyRecord, request: FastifyRequest) => Promise<Recovery>;
}

interface IdempotentRequest {
  recordId: string;
  /** The task id a video submission under this key must use. */
  taskId: string;
  finished: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: IdempotentRequest | null;
  }
}

const HEADER = 'idempotency-key';
/** What an Idempotency-Key may be; the OpenAPI document shows the same pattern. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** JSON with object keys sorted, so key order does not make two equal bodies differ. */
export function canonicalJson(value: unknown): string {
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

async function idempotencyPlugin(app: FastifyInstance, options: { store: IdempotencyStore; routes: Record<string, IdempotentRoute> }): Promise<void> {
  const { store, routes } = options;
  app.decorateRequest('idempotency', null);

  const claimKey = async (route: IdempotentRoute, request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers[HEADER];
    if (header === undefined) return;
    if (typeof header !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(header)) {
      throw new GatewayError('invalid_request', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces.', 'Idempotency-Key');
    }
    const principal = principalOf(request);
    const id = `${principal.keyId}:${sha256(header)}`;
    const fingerprint = sha256(`${request.routeOptions.url}\n${canonicalJson(request.body)}`);
    const now = new Date();
    const claim = await store.claim({ id, fingerprint, taskId: newId('task'), now });
    const { record } = claim;
    if (claim.kind === 'claimed') {
      request.idempotency = { recordId: id, taskId: record.task_id, finished: false };
      return;
    }
    if (record.fingerprint !== fingerprint) {
      throw new GatewayError('idempotency_mismatch', 'This Idempotency-Key was already used with a different request body. Use a new key for a new request.', 'Idempotency-Key');
    }
    if (record.state === 'completed') {
      return replay(reply, { statusCode: record.status_code ?? 200, body: record.body ?? '', ...(record.content_type ? { contentType: record.content_type } : {}) });
    }
    if (now.getTime() - record.created_at.getTime() < route.staleAfterMs) {
      throw new GatewayError('conflict', 'A request with this Idempotency-Key is still in progress. Retry after it finishes to get its answer.', 'Idempotency-Key');
    }
    const recovery: Recovery = (await route.recover?.(record, request)) ?? { rerun: 'same-task' };
    if ('replay' in recovery) {
      await store.complete(id, { statusCode: recovery.replay.statusCode, contentType: 'application/json; charset=utf-8', body: recovery.replay.body });
      return replay(reply, recovery.replay);
    }
    const taskId = recovery.rerun === 'new-task' ? newId('task') : record.task_id;
    if (!(await store.takeOver(id, record.created_at, now, taskId))) {
      throw new GatewayError('conflict', 'A retry with this Idempotency-Key is already in progress.', 'Idempotency-Key');
    }
    request.idempotency = { recordId: id, taskId, finished: false };
  };

  const keepAnswer = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const idempotent = request.idempotency;
    if (!idempotent || idempotent.finished) return payload;
    idempotent.finished = true;
    if (reply.statusCode >= 200 && reply.statusCode < 300 && typeof payload === 'string') {
      const contentType = String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8');
      await store.complete(idempotent.recordId, { statusCode: reply.statusCode, contentType, body: payload });
    } else {
      await store.release(idempotent.recordId);
    }
    return payload;
  };

  // A reply that ended without onSend (the caller left and the route gave the socket up): no
  // answer exists to keep. Not on the abort itself: a video submission goes on after its caller
  // leaves, and its record must then still lead a retry to the task it creates.
  const releaseUnanswered = async (request: FastifyRequest) => {
    const idempotent = request.idempotency;
    if (!idempotent || idempotent.finished) return;
    idempotent.finished = true;
    await store.release(idempotent.recordId);
  };

  // The hooks go on the idempotent routes only: every other route (chat above all) would pay
  // for three hooks that do nothing.
  app.addHook('onRoute', (options) => {
    const route = routes[options.url ?? options.path];
    if (!route || options.method !== 'POST') return;
    options.preHandler = [...asList(options.preHandler), (request, reply) => claimKey(route, request, reply)];
    options.onSend = [...asList(options.onSend), keepAnswer];
    options.onResponse = [...asList(options.onResponse), releaseUnanswered];
  });
}

export const idempotency = fp(idempotencyPlugin, { name: 'idempotency' });
