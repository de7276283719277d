import { GatewayError } from '../../../core/errors.ts';
import type { ClientDisconnect } from './client-disconnect.ts';

// The chat and image calls this process is serving, so that a shutdown does not wait on them
// for ever. When the api closes, the server stops taking connections and waits for the
// requests it is serving; a stream can run for minutes, longer than an orchestrator waits
// before it kills the process (Kubernetes: 30 s). A kill leaves the caller with a cut stream and
// no error, and the spend leases unsettled: the calls of their last seconds go unbilled and the
// money stays held until the leases expire. So the calls still running `graceMs` after the
// close began are interrupted: each caller gets a 503 (or, mid-stream, an error event), nothing
// is charged for them, and the process goes on to settle its leases and exit.

/** A 503 telling the caller the gateway is restarting and to retry in a second (behind a load
 * balancer, another process takes the retry). What an interrupted call gets, and a request
 * arriving during the close (api/plugins/graceful-close.ts). */
export function restartRefusal(message: string): GatewayError {
  return new GatewayError('service_unavailable', message, undefined, { 'retry-after': '1' });
}

export class CallsInFlight {
  private readonly calls = new Set<ClientDisconnect>();
  /** Calls their callers left that run on to their end (carried-call.ts). */
  private readonly abandoned = new Set<ClientDisconnect>();
  /** The waits of `abandonedEnded`, resolved when the last abandoned call ends. */
  private readonly abandonedWaits: Array<() => void> = [];
  /** Idempotency-Key record writes of answers under way (api/plugins/idempotency.ts). */
  private readonly answerWrites = new Set<Promise<unknown>>();
  private timer: NodeJS.Timeout | undefined;
  /** Set once the grace is over: calls whose handler starts later (their body was slow to
   * arrive, say) are interrupted as they start. */
  private interruption: GatewayError | undefined;

  add(call: ClientDisconnect): void {
    if (this.interruption) return call.interrupt(this.interruption);
    this.calls.add(call);
  }

  delete(call: ClientDisconnect): void {
    this.calls.delete(call);
  }

  /** A call whose caller left and that runs on (an image the provider is making). A close
   * gives it the same grace as the calls still answered: the provider bills the operator for
   * the images whether or not anyone waits, so one that comes back within the grace is charged
   * rather than lost to the restart. Its connection is gone, so the server's close does not
   * wait for it: the close waits through `abandonedEnded`. */
  addAbandoned(call: ClientDisconnect): void {
    if (this.interruption) return call.interrupt(this.interruption);
    this.abandoned.add(call);
  }

  deleteAbandoned(call: ClientDisconnect): void {
    this.abandoned.delete(call);
    if (this.abandoned.size === 0) for (const resolve of this.abandonedWaits.splice(0)) resolve();
  }

  /** Resolves once no abandoned call runs: at the latest when the grace ends and interrupts them,
   * and then only after an image that came back in time was charged (image-proxy.ts charges in
   * the same turn as it lets go of its call). */
  abandonedEnded(): Promise<void> {
    if (this.abandoned.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.abandonedWaits.push(resolve));
  }

  /** An answer's Idempotency-Key record being written. The answer of a call its caller left
   * has no connection for the server's close to wait on, and its record must land before the
   * store closes: without it, a retry under the key would pay for the images again. */
  keepAnswerWrite(write: Promise<unknown>): void {
    this.answerWrites.add(write);
    write.then(
      () => this.answerWrites.delete(write),
      () => this.answerWrites.delete(write),
    );
  }

  /** Resolves once no answer's record is being written. */
  async answerWritesDone(): Promise<void> {
    while (this.answerWrites.size > 0) await Promise.allSettled([...this.answerWrites]);
  }

  get size(): number {
    return this.calls.size;
  }

  /** Interrupts the calls still running `graceMs` from now. */
  interruptAfter(graceMs: number): void {
    if (this.timer) return;
    this.timer = setTimeout(() => this.interruptAll(graceMs), graceMs);
    // The close it belongs to may finish first; the process must not stay up for the timer.
    this.timer.unref();
  }

  /** Stops the pending interruption (the close finished). */
  stop(): void {
    clearTimeout(this.timer);
  }

  private interruptAll(graceMs: number): void {
    const seconds = Math.round(graceMs / 100) / 10;
    this.interruption = restartRefusal(`The gateway is restarting and ended this call after waiting ${seconds} s for it; nothing was charged. Retry shortly.`);
    for (const call of [...this.calls]) call.interrupt(this.interruption);
    this.calls.clear();
    // Each interrupted call lets go of itself (deleteAbandoned) as its upstream request ends.
    for (const call of [...this.abandoned]) call.interrupt(this.interruption);
  }
}
