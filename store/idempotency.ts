import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';
import { guardedDelete, guardedUpdate } from './guarded-writes.ts';
import { IdempotencyAnswerPieces } from './idempotency-answer-pieces.ts';
import { IdempotencyTurns } from './idempotency-turns.ts';
import { StoreClock } from './store-clock.ts';

// Idempotency-Key records: one per (API key, Idempotency-Key), kept 24 hours. The insert of
// the record is the claim (a unique _id, atomic on FerretDB and MongoDB alike): whoever inserts
// it runs the request, everyone else finds the record and gets the stored answer, a 409 while
// it runs, or a 422 when their body differs. A video record carries its task id from the
// start, so a retry after a crash can tell whether the task was created.
//
// The attempt that holds a record refreshes it while it runs (api/plugins/idempotency.ts), so a
// retry tells a slow attempt (still refreshed: 409) from one whose process died (not refreshed
// for a while: taken over). Times are the store's clock (store-clock.ts): a record refreshed by
// one api process is judged by another, whose own clock may be off.

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1_000;
/** Tries to claim: a duplicate, then the expired record replaced (by this claim or another's). */
const CLAIM_ATTEMPTS = 6;
/** A claim that another is replacing an expired record for looks again after this pause,
 * doubled each time (1.55 s in all, room for the other's turn, delete and insert on a busy
 * store). */
const REPLACE_WAIT_MS = 50;

export interface IdempotencyRecord {
  /** `${keyId}:${sha256(Idempotency-Key)}` */
  _id: string;
  /** sha256 of the route and the parsed body. */
  fingerprint: string;
  /** The route it was claimed on (`/v1/video/generations`), so a key reused on another endpoint
   * is told so; absent on records from before it was kept, and on the console's form claims. */
  route?: string;
  state: 'in_flight' | 'completed';
  /** The task id a video submission under this record uses. */
  task_id: string;
  status_code?: number;
  content_type?: string;
  body?: string;
  /** Instead of `body`, for an answer too long for the record: how many pieces keep it
   * (store/idempotency-answer-pieces.ts), written by the claim at `created_at`. */
  body_pieces?: number;
  /** When this attempt claimed the record (or took it over); identifies the attempt. */
  created_at: Date;
  /** When the attempt last said it is still running; absent on records from before refreshes
   * (their created_at stands in). */
  refreshed_at?: Date;
  expires_at: Date;
}

/** When the attempt holding `record` was last known to be alive. */
export function lastSignOfLife(record: IdempotencyRecord): Date {
  return record.refreshed_at ?? record.created_at;
}

/** `contended`: other claims kept replacing an expired record meanwhile; one of them holds it now, or soon. */
export type Claim = { kind: 'claimed'; record: IdempotencyRecord } | { kind: 'exists'; record: IdempotencyRecord } | { kind: 'contended' };

export class IdempotencyStore {
  readonly collection: Collection<IdempotencyRecord>;
  readonly pieces: IdempotencyAnswerPieces;
  readonly turns: IdempotencyTurns;

  constructor(
    db: Db,
    private readonly clock = new StoreClock(db),
  ) {
    this.collection = db.collection<IdempotencyRecord>('idempotency_keys');
    this.pieces = new IdempotencyAnswerPieces(db);
    this.turns = new IdempotencyTurns(db, clock);
  }

  /** The store's time, which every process judges records by. */
  now(): Date {
    return new Date(this.clock.now());
  }

  // The writes below are guarded by the claim's time, beside _id in their filter
  // (store/guarded-writes.ts). What two attempts may race for (ending a claim, replacing an
  // expired record) is decided first by a unique insert (idempotency-turns.ts): FerretDB checks
  // a filter on a read before it writes, and a check of our own a round trip before the write
  // let two claims of one expired key both win (a review forced it).
  // Refusals the hold queue makes at once claim nothing (api/plugins/idempotency.ts).

  /** The record, expired or not, if there is one. */
  find(id: string): Promise<IdempotencyRecord | null> {
    return this.collection.findOne({ _id: id });
  }

  /** Claims the record, or returns the one already there (an expired one is replaced). */
  async claim(input: { id: string; fingerprint: string; taskId: string; now: Date; route?: string }): Promise<Claim> {
    const record: IdempotencyRecord = {
      _id: input.id,
      fingerprint: input.fingerprint,
      ...(input.route === undefined ? {} : { route: input.route }),
      state: 'in_flight',
      task_id: input.taskId,
      created_at: input.now,
      refreshed_at: input.now,
      expires_at: new Date(input.now.getTime() + IDEMPOTENCY_TTL_MS),
    };
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      try {
        await this.collection.insertOne(record);
        return { kind: 'claimed', record };
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
      const existing = await this.collection.findOne({ _id: input.id });
      if (existing && existing.expires_at > input.now) return { kind: 'exists', record: existing };
      // Expired (or deleted meanwhile): remove exactly that one and claim afresh. One retry
      // removes it; the others find the record that retry claims, or claim it themselves.
      const turn = existing && (await this.turns.take('replace', input.id, existing.created_at));
      if (existing && turn) await guardedDelete(this.collection, input.id, { created_at: existing.created_at }, turn);
      else if (existing) await new Promise((resolve) => setTimeout(resolve, REPLACE_WAIT_MS * 2 ** attempt));
    }
    return { kind: 'contended' };
  }

  /** Marks an abandoned in-flight record as taken over by a retry, which uses `taskId`; false
   * when another retry takes it over. */
  async takeOver(id: string, createdAt: Date, now: Date, taskId: string): Promise<boolean> {
    const turn = await this.turns.take('take-over', id, createdAt);
    if (!turn) return false;
    const takeOver = { $set: { created_at: now, refreshed_at: now, task_id: taskId } };
    if (!(await guardedUpdate(this.collection, id, { state: 'in_flight', created_at: createdAt }, takeOver, turn))) return false;
    // On FerretDB an update is a whole-document read and write: the silent holder's refresh, read
    // before this write and written after it, would put its claim back. Confirmed, or written
    // once more (this turn is still ours).
    if ((await this.collection.findOne({ _id: id }))?.created_at.getTime() === now.getTime()) return true;
    return guardedUpdate(this.collection, id, { state: 'in_flight', created_at: createdAt }, takeOver, turn);
  }

  /** Notes that the attempt that claimed the record at `createdAt` is still running; nothing
   * when the record was answered, released or taken over meanwhile. */
  async refresh(id: string, createdAt: Date): Promise<void> {
    // No turn: a refresh that lands on a record taken over or completed meanwhile only moves its
    // refreshed_at, which a retry reads as a sign of life for at most a stale window.
    await guardedUpdate(this.collection, id, { state: 'in_flight', created_at: createdAt }, { $set: { refreshed_at: this.now() } });
  }

  /** Keeps an answer too long for its record in pieces beside it (none for a shorter one:
   * undefined); complete() then names them. Written while the request still refreshes its
   * record, so a slow store cannot let a retry take the record over meanwhile. */
  async keepAnswerPieces(id: string, claimedAt: Date, body: string): Promise<number | undefined> {
    if (!IdempotencyAnswerPieces.needed(body)) return undefined;
    // Until a record claimed now would expire: no earlier than this one.
    return this.pieces.keep(id, claimedAt, body, new Date(this.clock.now() + IDEMPOTENCY_TTL_MS));
  }

  /** Stores the answer of the attempt that claimed the record at `claimedAt` (in the pieces
   * keepAnswerPieces() wrote, when `pieces` says so; written now, when needed and not yet); nothing
   * when a retry took the record over meanwhile (that attempt's answer is the one to keep).
   * `recover`: a retry completes a silent attempt's claim with the answer its work left; then
   * that attempt, should it wake, leaves the record as it is. True when this call wrote it. */
  async complete(id: string, claimedAt: Date, answer: { statusCode: number; contentType: string; body: string; pieces?: number }, by: 'end' | 'recover' = 'end'): Promise<boolean> {
    const completed = { state: 'completed' as const, status_code: answer.statusCode, content_type: answer.contentType };
    const pieces = answer.pieces ?? (await this.keepAnswerPieces(id, claimedAt, answer.body));
    const kept = pieces === undefined ? { body: answer.body } : { body_pieces: pieces };
    const turn = await this.turns.take(by, id, claimedAt);
    return turn !== null && (await guardedUpdate(this.collection, id, { created_at: claimedAt }, { $set: { ...completed, ...kept } }, turn));
  }

  /** The answer a completed record keeps. */
  answerOf(record: IdempotencyRecord): Promise<string> {
    return record.body_pieces === undefined ? Promise.resolve(record.body ?? '') : this.pieces.read(record._id, record.created_at, record.body_pieces);
  }

  /** Forgets a request that did not succeed, so the caller can retry it under the same key;
   * nothing when a retry took the record over meanwhile (it is that retry's now). */
  async release(id: string, claimedAt: Date): Promise<void> {
    const turn = await this.turns.take('end', id, claimedAt);
    if (!turn) return;
    await guardedDelete(this.collection, id, { state: 'in_flight', created_at: claimedAt }, turn);
  }

  /** Deletes the records, answer pieces and turns past their time: by the store's clock, which
   * wrote those times, unless `now` is given (tests). Judged on the sweeping worker's own clock,
   * one running an hour ahead would delete turns that still decide live claims. */
  async deleteExpired(now?: Date): Promise<number> {
    now ??= new Date(await this.clock.current());
    // One by one, each under the turn a claim replacing it takes: on FerretDB a deleteMany reads,
    // then deletes by _id, and would take the record a retry had just claimed in place of one.
    let records = 0;
    for (const { _id, created_at: createdAt } of await this.collection.find({ expires_at: { $lt: now } }, { projection: { _id: 1, created_at: 1 } }).toArray()) {
      const turn = await this.turns.take('replace', _id, createdAt);
      if (turn && (await guardedDelete(this.collection, _id, { created_at: createdAt }, turn))) records++;
    }
    return records + (await this.pieces.deleteExpired(now)) + (await this.turns.deleteExpired(now));
  }

  /** The store's time now, read afresh when the last reading is old: what claims and their
   * expiries are judged by (a process just started has no reading yet). */
  async current(): Promise<Date> {
    return new Date(await this.clock.current());
  }
}
