import { setTimeout as pause } from 'node:timers/promises';

/** The throttles count in fixed windows of the wall clock (core/failures-by-address.ts). A test
 * that sends a window's worth of attempts and then expects a 429 waits here, when the current
 * window ends within `marginMs`, until the next one begins: otherwise a count reset halfway
 * would let it through now and then. */
export async function clearOfWindowEdge(windowMs: number, marginMs: number): Promise<void> {
  const toEdge = windowMs - (Date.now() % windowMs);
  if (toEdge < marginMs) await pause(toEdge + 50);
}
