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
// - A caller who left while the request was out, when the provider then dropped the
//   connection at once (it never worked on the request), ends it: the gateway would otherwise
//   send it again for nobody (upstream-client.ts), and charge it.
// - The gateway's interruption (a shutdown's grace ending) cancels it always. Until then an
//   abandoned call runs on through the close, which waits for it (calls-in-flight.ts).

/** The carried call's signal: aborted by its caller's leaving only while its request is not
 * with the provider. */
class CarriedSignal extends ClientDisconnect {
  /** Why the caller left, once it left while the request was out. */
  callerLeft: Error | undefined;

  override markUnsent(): void {
    super.markUnsent();
    if (this.callerLeft) this.abort(this.callerLeft);
  }
}

export class CarriedCall {
  /** The signal the upstream request is sent with. */
  readonly signal = new CarriedSignal();
  /** The caller left while the request was out: nobody waits for the answer. */
  abandoned = false;
  private finished = false;

  constructor(
    private readonly caller: ClientDisconnect,
    private readonly calls?: CallsInFlight,
  ) {
    if (caller.aborted) this.follow(caller.abortReason);
    else caller.once('abort', this.follow);
  }

  private readonly follow = (reason: Error): void => {
    if (this.finished) return;
    if (this.caller.interruption) return this.signal.interrupt(this.caller.interruption);
    if (!this.signal.requestSent) return this.signal.abort(reason);
    this.abandoned = true;
    this.signal.callerLeft = reason;
    this.calls?.addAbandoned(this.signal);
  };

  /** The upstream call is over, answered or not. */
  done(): void {
    this.finished = true;
    this.caller.off('abort', this.follow);
    this.calls?.deleteAbandoned(this.signal);
  }
}
