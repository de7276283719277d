import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { chatPriceMicros, estimateTokens, NO_TOKENS, type TokenCounts } from '../../../core/chat-pricing.ts';
import { GatewayError } from '../../../core/errors.ts';
import { countChatCharge, observeTimeToFirstToken } from '../../../core/metrics.ts';
import { chargePromptOnly, reportedWithin, type StartedChatCall } from './chat-proxy.ts';
import type { ClientDisconnect } from './client-disconnect.ts';
import { sseData } from './chunk-translation.ts';
import { relayChatStream, type RelayOutcome } from './sse-relay.ts';

// A streamed completion once the upstream has said yes: write the SSE head, relay the chunks,
// end the stream with `data: [DONE]` (or an error event), then charge the reservation (in
// memory; the ledger sees it when the account's spend lease settles).
//
// How each ending is billed:
// - completed: the upstream's usage, in full (beyond the hold if the estimate was low), never
//   beyond what the call can have used (core/chat-pricing.ts chatUsageCeiling);
//   without a usage chunk, the prompt estimate plus the delivered text, capped at the hold.
// - the caller disconnected: the upstream's usage if it already arrived (its output never less
//   than what was delivered: a report before the end is no total), otherwise the prompt
//   estimate plus what was delivered (max of chunks and characters/4 as output tokens), capped
//   at the reservation; the prompt estimate alone when not a single piece of output had been
//   delivered (chunk-translation.ts counts what output is): the provider had the request and
//   bills its prompt, as for a non-streamed call abandoned before its answer.
// - the upstream failed mid-stream: nothing (spec 7 rule 4, failed requests are not billed).
// - the gateway ended it (a shutdown past its grace, calls-in-flight.ts): nothing, as a failure
//   of ours; the caller's last event is the error, so it knows to retry.

export interface ChatStreamOptions {
  forwardUsage: boolean;
  /** The choices the caller asked for (`n`). */
  choices: number;
  signal: ClientDisconnect;
  log: FastifyBaseLogger;
  /** performance.now() when the request arrived, for the time-to-first-token metric. */
  receivedAt: number;
  /** How long the caller may take nothing before the call ends (sse-relay.ts). */
  maxCallerStallMs: number;
}

/** Output tokens of what a stream delivered, when the upstream did not say. */
export function deliveredOutputTokens(outcome: RelayOutcome): number {
  return Math.max(outcome.delivered.pieces, estimateTokens(outcome.delivered.characters));
}

export class ChatStream {
  constructor(
    private readonly call: StartedChatCall,
    private readonly options: ChatStreamOptions,
  ) {}

  /** Never throws: once the head is written, every failure ends the stream instead. */
  async pipeTo(response: ServerResponse, headers: Record<string, string>): Promise<void> {
    const { model, response: upstream } = this.call;
    response.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      // Tells nginx-style proxies in front of the gateway not to buffer the stream.
      'x-accel-buffering': 'no',
    });
    let outcome: RelayOutcome;
    try {
      outcome = await relayChatStream({
        upstream: upstream.body,
        response,
        signal: this.options.signal,
        forwardUsage: this.options.forwardUsage,
        modelId: model.id,
        choices: this.options.choices,
        onFirstText: () => observeTimeToFirstToken(model.id, this.options.receivedAt),
        maxCallerStallMs: this.options.maxCallerStallMs,
      });
    } catch (error) {
      outcome = { end: 'upstream_failed', delivered: { pieces: 0, characters: 0 }, failure: error instanceof Error ? error.message : String(error) };
    }
    switch (outcome.end) {
      case 'completed':
        response.end('data: [DONE]\n\n');
        break;
      case 'upstream_failed': {
        this.options.log.warn({ failure: outcome.failure, providerMessage: outcome.providerMessage }, 'chat stream failed upstream');
        // The failure's own full stop, if any, gives way to the sentence's.
        const failure = (outcome.failure ?? 'no reason given').replace(/[.\s]+$/, '');
        const error = { message: `The model provider failed mid-stream: ${failure}. Nothing was charged; retry.`, type: 'upstream_error', code: 'upstream_error' };
        response.end(sseData(JSON.stringify({ error })));
        upstream.body.destroy();
        break;
      }
      case 'interrupted': {
        // outcome.failure is the interruption's message (sse-relay.ts).
        const error = new GatewayError('service_unavailable', outcome.failure ?? 'The gateway ended this stream.');
        this.options.log.warn({ failure: outcome.failure }, 'chat stream interrupted by the gateway');
        response.end(sseData(JSON.stringify(error.toBody())));
        upstream.body.destroy();
        break;
      }
      case 'client_gone':
        upstream.body.destroy();
        response.destroy();
    }
    try {
      this.settle(outcome);
    } catch (error) {
      this.options.log.error({ err: error }, 'charging a chat stream failed; it is not billed');
    } finally {
      // Charged or released by now; released if charging threw: a reservation left unsettled
      // would keep its lease from ever settling. A call not charged used no tokens either.
      this.call.reservation.release();
      this.call.countTokens(NO_TOKENS);
    }
  }

  private settle(outcome: RelayOutcome): void {
    const { model, reservation, holdTokens, ceiling } = this.call;
    // Never more output than the call's budget: a firehose upstream can deliver more chunks.
    const estimated: TokenCounts = { inputTokens: holdTokens.inputTokens, outputTokens: Math.min(deliveredOutputTokens(outcome), ceiling.outputTokens) };
    const usage = outcome.usage && reportedWithin(this.call, outcome.usage, this.options.log);
    switch (outcome.end) {
      case 'completed': {
        const tokens = usage ?? estimated;
        countChatCharge(model.id, tokens, reservation.charge(chatPriceMicros(model, tokens), tokens, { allowOverage: usage !== undefined }));
        this.call.countTokens(tokens);
        return;
      }
      case 'client_gone': {
        // The provider had the request (it answered its head): the prompt at least is billed.
        if (!usage && outcome.delivered.pieces === 0) return chargePromptOnly(this.call);
        // A usage report from before the stream's end (some compatible providers report one
        // with their first chunk, or a running count) is no total: it is not let bill less
        // output than was delivered.
        const tokens = usage ? { ...usage, outputTokens: Math.max(usage.outputTokens, estimated.outputTokens) } : estimated;
        countChatCharge(model.id, tokens, reservation.charge(chatPriceMicros(model, tokens), tokens, { allowOverage: false }));
        this.call.countTokens(tokens);
        return;
      }
      case 'upstream_failed':
      case 'interrupted':
        return reservation.release();
    }
  }
}
