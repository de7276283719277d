import { randomBytes } from 'node:crypto';

// Prefixed, sortable-enough random ids. The prefix tells an operator what an id names when it
// shows up in a log line or the Temporal Web UI.
export type IdKind = 'acct' | 'key' | 'task' | 'req' | 'lease';

export function newId(kind: IdKind): string {
  return `${kind}_${randomBytes(12).toString('base64url')}`;
}
