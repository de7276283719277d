import { randomFillSync } from 'node:crypto';

// Prefixed, sortable-enough random ids. The prefix tells an operator what an id names when it
// shows up in a log line or the Temporal Web UI.
export type IdKind = 'acct' | 'key' | 'task' | 'req' | 'lease';

// Every request gets an id, so ids draw their random bytes from a pool filled 341 ids at a
// time: one call into the CSPRNG per pool instead of one per id (randomUUID does the same).
// The bytes are just as unpredictable; each is handed out once.
const ID_BYTES = 12;
const pool = Buffer.alloc(ID_BYTES * 341);
let offset = pool.length;

export function newId(kind: IdKind): string {
  if (offset + ID_BYTES > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const id = `${kind}_${pool.toString('base64url', offset, offset + ID_BYTES)}`;
  offset += ID_BYTES;
  return id;
}
