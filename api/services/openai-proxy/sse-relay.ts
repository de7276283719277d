import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import type { TokenCounts } from '../../../core/chat-pricing.ts';
import { allChoicesFinished, newRelayState, translate, type DeliveredText, type RelayState } from './chunk-translation.ts';
import { drained, type ClientDisconnect } from './client-disconnect.ts';

// Relays an upstream chat.completion.chunk stream to the caller as it arrives. Every event is
// parsed (a few microseconds per chunk) because the gateway must see three things in it: the
// usage chunk it bills from, an upstream error event, and how much text was delivered, which
// prices a stream the caller cancels before the upstream reported usage. Chunks go out as the
// upstream wrote them unless the model id has to be rewritten; all events parsed from one
// upstream read leave in one write. The final `data: [DONE]` (or error event) is written by
// chat-stream.ts, which decides how the call ended. What each event becomes is
// chunk-translation.ts's.

/** `interrupted`: the gateway ended the stream itself (a shutdown, calls-in-flight.ts). */
export type RelayEnd = 'completed' | 'client_gone' | 'upstream_failed' | 'interrupted';

export interface RelayOutcome {
  end: RelayEnd;
  usage?: TokenCounts;
  delivered: DeliveredText;
  /** Why the upstream stream failed (or the gateway ended it), in the gateway's words, for the
   * caller's error event and the log. */
  failure?: string;
  /** What the provider itself said of its failure: for the log only (it can name the
   * operator's organisation or project). */
  providerMessage?: string;
}

export interface RelayOptions {
  upstream: Readable;
  response: ServerResponse;
  /** Fires when the caller disconnects or the gateway interrupts the call; it also aborts the
   * upstream body. */
  signal: ClientDisconnect;
  /** The caller asked for stream_options.include_usage itself. */
  forwardUsage: boolean;
  /** The model id the caller used; chunks naming another model are rewritten. */
  modelId: string;
  /** The choices the caller asked for (`n`, 1 by default). */
  choices?: number;
  /** Called once, right after the first text was written to the caller. */
  onFirstText?: () => void;
  /** Tests shorten MAX_EVENTLESS_MS. */
  maxEventlessMs?: number;
  /** How long the caller may take nothing (its socket full) before the call ends as if it had
   * left; MAX_CALLER_STALL_MS by default. */
  maxCallerStallMs?: number;
}

/** The most bytes the upstream may send without completing an event. A chat chunk is a few
 * hundred bytes; the parser keeps an unfinished event in memory, so an upstream that never ends
 * one must not be able to take the process's memory. */
export const MAX_EVENT_BYTES = 16 * 1024 * 1024;

/** How long an upstream body may stay open after its `[DONE]` before it is dropped. */
const DONE_GRACE_MS = 2_000;

/** The longest an upstream may keep a stream open with keep-alive comments alone, no event: as
 * long as it may take to answer at all (upstream-client.ts). Silence itself ends a stream after
 * undici's body timeout (300 s between two reads). */
export const MAX_EVENTLESS_MS = 600_000;

/** The longest a caller may leave written chunks unread: a frozen client that keeps its socket
 * open otherwise held the upstream's connection (paused by backpressure, which undici's body
 * timeout does not count) and the call's reservation for good. As long as a provider may stay
 * silent (undici's body timeout, upstream-client.ts), which chat-proxy.ts passes in. */
export const MAX_CALLER_STALL_MS = 300_000;

/** Relays one stream: its parser, its state and the upstream's event handlers together. */
class ChatStreamRelay {
  private readonly state: RelayState;
  private readonly parser: EventSourceParser;
  // Not TextDecoder: with `stream: true` Node 20 opens an ICU converter per stream and decodes
  // every chunk through it, about 8 µs more per stream on a cold process (3 chunks, measured).
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  /** Some text was decoded: a byte order mark can only lead the first. */
  private decodedAny = false;
  /** Bytes fed since the last complete event (give or take the rest of one read). */
  private bytesSinceEvent = 0;
  private firstTextSent = false;
  /** Events parsed so far, and as many when a comment last came; since when only comments. */
  private events = 0;
  private eventsAtComment = -1;
  private eventlessSince = 0;
  private readonly maxEventlessMs: number;
  /** The head has gone (flushed, or with a write). Not `response.headersSent`: that is true as
   * soon as writeHead() stored the head, before any byte of it left. */
  private headSent = false;
  private finished = false;
  readonly outcome: Promise<RelayOutcome>;
  private resolve!: (outcome: RelayOutcome) => void;

  constructor(private readonly options: RelayOptions) {
    this.maxEventlessMs = options.maxEventlessMs ?? MAX_EVENTLESS_MS;
    this.state = newRelayState(options.choices ?? 1);
    this.parser = createParser({ onEvent: this.onEvent.bind(this), onComment: this.onComment.bind(this) });
    // The head (written, not yet sent) leaves with the first chunk when that chunk came with
    // the upstream's headers, the usual case: one write, and the caller is woken once instead
    // of twice. Otherwise it goes now, so the caller sees the call accepted while the model is
    // still thinking.
    if (options.upstream.readableLength === 0) this.sendHead();
    this.outcome = new Promise((resolve) => (this.resolve = resolve));
    // Stream events rather than `for await`: the async iterator's setup and its promise per
    // chunk stood between the upstream's first chunk and the caller, about 0.1 ms of a
    // stream's time to first token on a cold process. The listeners stay until the stream is
    // gone: an error the body emits after the relay ended (undici destroying it on a
    // disconnect) must still find a listener.
    options.upstream
      .on('data', (bytes: Buffer) => this.onData(bytes))
      .on('end', () => this.finish(this.ended()))
      .on('error', (error: unknown) => this.onError(error))
      // Destroyed without an error or an end: the stream stopped before it was complete.
      .on('close', () => this.finish(this.options.signal.aborted ? this.aborted() : this.brokenOff('the stream from the model provider ended early')));
  }

  private onEvent(event: EventSourceMessage): void {
    this.bytesSinceEvent = 0;
    this.events++;
    if (this.state.sawDone || this.state.failure !== undefined) return;
    this.pending += translate(event, this.state, this.options.forwardUsage, this.options.modelId);
  }

  // Keep-alive comments keep idle proxies between the caller and us from timing out.
  private onComment(comment: string): void {
    // Not a reset of bytesSinceEvent: a comment line can sit inside an unfinished event.
    this.pending += `:${comment}\n\n`;
    // Comments alone reset every read timeout: they cannot keep a stream (and its reservation)
    // open for ever. Timed from the first comment after the last event: events only count,
    // so a chunk costs no clock read.
    const now = performance.now();
    if (this.events !== this.eventsAtComment) {
      this.eventsAtComment = this.events;
      this.eventlessSince = now;
    } else if (now - this.eventlessSince > this.maxEventlessMs) {
      this.state.failure ??= `the model provider sent no event for ${Math.round(this.maxEventlessMs / 1000)} s`;
    }
  }

  private onData(bytes: Buffer): void {
    if (this.finished) return;
    try {
      this.relay(bytes);
    } catch (error) {
      // A throw in a stream listener would take the process down: end this stream instead.
      return this.finish(this.result('upstream_failed', `the stream could not be relayed (${error instanceof Error ? error.message : String(error)})`));
    }
    if (this.bytesSinceEvent > MAX_EVENT_BYTES) {
      return this.finish(this.result('upstream_failed', `the model provider sent more than ${MAX_EVENT_BYTES / 1_048_576} MiB without ending an event`));
    }
    if (this.state.failure !== undefined || this.options.signal.aborted) return this.finish(this.ended());
    // `[DONE]` is the answer's end: the caller gets it now, and the call is charged, whatever
    // the upstream's connection does after it (a reset, or a body never closed, would otherwise
    // turn a whole answer into a failure, or keep the caller waiting for the body timeout).
    if (this.state.sawDone) this.finishAtDone();
  }

  private finishAtDone(): void {
    const { upstream } = this.options;
    this.finish(this.ended());
    if (upstream.readableEnded || upstream.destroyed) return;
    // The end usually follows in the same read; a body still open after a grace is dropped.
    const timer = setTimeout(() => upstream.destroy(), DONE_GRACE_MS);
    upstream.once('close', () => clearTimeout(timer));
  }

  private relay(bytes: Buffer): void {
    const { response, upstream, signal } = this.options;
    this.bytesSinceEvent += bytes.length;
    let text = this.decoder.write(bytes);
    if (!this.decodedAny && text !== '') {
      this.decodedAny = true;
      // An event stream may begin with a byte order mark, which its decoding drops (WHATWG's
      // UTF-8 decode); left in, it made the first line's field name "\uFEFFdata" and the
      // parser skipped the first event.
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.parser.feed(text);
    if (this.pending !== '') {
      const text = this.pending;
      this.pending = '';
      // Backpressure: stop reading the upstream (its socket fills and it slows down) until
      // the caller has taken what was written.
      this.headSent = true;
      if (!response.write(text)) {
        upstream.pause();
        void drained(response, signal, this.options.maxCallerStallMs ?? MAX_CALLER_STALL_MS).then((took) => {
          if (this.finished) return;
          if (took) return upstream.resume();
          // Ended as a caller gone: billed for what was delivered, the upstream request cancelled.
          this.finish(this.result('client_gone'));
        });
      }
      if (!this.firstTextSent && this.state.delivered.pieces > 0) {
        this.firstTextSent = true;
        this.options.onFirstText?.();
      }
    }
    // Bytes that made no event yet must not keep the head from the caller.
    if (!this.headSent) this.sendHead();
  }

  private sendHead(): void {
    this.headSent = true;
    this.options.response.flushHeaders();
  }

  private onError(error: unknown): void {
    if (this.options.signal.aborted) return this.finish(this.aborted());
    this.finish(this.brokenOff(`the stream from the model provider broke off (${error instanceof Error ? error.message : String(error)})`));
  }

  /** The upstream's connection failed before its end: a failure, unless every choice had
   * finished (a provider that sends no `[DONE]`, or resets after its last chunk). The caller has
   * the whole answer then, and a failure would tell it to retry (a second generation) unbilled. */
  private brokenOff(why: string): RelayOutcome {
    return this.state.failure === undefined && allChoicesFinished(this.state) ? this.ended() : this.result('upstream_failed', why);
  }

  private ended(): RelayOutcome {
    const { state } = this;
    if (this.options.signal.aborted) return this.aborted();
    if (state.failure !== undefined) return this.result('upstream_failed', state.failure);
    if (!state.sawDone && !allChoicesFinished(state)) return this.result('upstream_failed', 'the stream from the model provider ended early');
    return this.result('completed');
  }

  /** The outcome once the signal fired: the caller left, or the gateway ended the call. */
  private aborted(): RelayOutcome {
    const { interruption } = this.options.signal;
    return interruption ? this.result('interrupted', interruption.message) : this.result('client_gone');
  }

  private result(end: RelayEnd, failure?: string): RelayOutcome {
    return {
      end,
      delivered: this.state.delivered,
      ...(this.state.usage ? { usage: this.state.usage } : {}),
      ...(failure !== undefined ? { failure } : {}),
      ...(this.state.providerMessage !== undefined ? { providerMessage: this.state.providerMessage } : {}),
    };
  }

  private finish(outcome: RelayOutcome): void {
    if (this.finished) return;
    this.finished = true;
    this.resolve(outcome);
  }
}

export function relayChatStream(options: RelayOptions): Promise<RelayOutcome> {
  return new ChatStreamRelay(options).outcome;
}
