import type { CallsInFlight } from './calls-in-flight.ts';
import { ClientDisconnect } from './client-disconnect.ts';

// An upstream call that runs to its end once its request went out, whether or not its caller
// waits: an image. The provider makes the image and bills the operator for it once it has the
// request, cancelled or not, so a caller who gave up (a client timeout shorter than the model's
// minute) would otherwise cost the operator an image it never paid for, as often as it retried.
// Carried on, the images that come back are charged, and kept for a retry under the same
// Idempotency-Key, which then gets them instead of paying for new ones.
//
// - The caller leaving before the request went out (waiting for a connection) cancels it: the
//   provider never saw it.
// - A caller who left while the request was out leaves it running even when a connection the
//   provider dropped at once makes the gateway send it again (upstream-client.ts): rare, and
//   the images of that attempt are charged as any others.
// - The gateway's interruption (a shutdown) cancels it always. An abandoned call is ended as
//   the close begins, uncharged (calls-in-flight.ts).

export class CarriedCall {
  /** The signal the upstream request is sent with. */
  readonly signal: ClientDisconnect;
  /** The caller left while the request was out: nobody waits for the answer. */
  abandoned = false;
  private finished = false;

  constructor(
    private readonly caller: ClientDisconnect,
    private readonly calls?: CallsInFlight,
  ) {
    // Not bound to a response: only this call and the gateway abort it.
    this.signal = new ClientDisconnect();
    if (caller.aborted) this.follow(caller.abortReason);
    else caller.once('abort', this.follow);
  }

  private readonly follow = (reason: Error): void => {
    if (this.finished) return;
    if (this.caller.interruption) return this.signal.interrupt(this.caller.interruption);
    if (!this.signal.requestSent) return this.signal.abort(reason);
    this.abandoned = true;
    this.calls?.addAbandoned(this.signal);
  };

  /** The upstream call is over, answered or not. */
  done(): void {
    this.finished = true;
    this.caller.off('abort', this.follow);
    this.calls?.deleteAbandoned(this.signal);
  }
}
