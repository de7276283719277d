import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';

/** A stand-in for a caller's response, so a ClientDisconnect can be fired by hand: 'close',
 * `writableFinished` and `destroyed` are all it reads (client-disconnect.ts). */
export class FakeCallerResponse extends EventEmitter {
  writableFinished = false;
  destroyed = false;
}

export const asResponse = (fake: FakeCallerResponse) => fake as unknown as ServerResponse;
