import type { FastifyBaseLogger } from 'fastify';
import type { Catalog, ChatModel } from '../../../core/catalog.ts';
import { chatHoldTokens, chatPriceMicros, estimateTokens, type TokenCounts } from '../../../core/chat-pricing.ts';
import { newId } from '../../../core/ids.ts';
import { resolveModel } from '../../../core/model-access.ts';
import type { ChatCompletionRequest } from '../../routes/chat/schemas.ts';
import type { Principal } from '../../plugins/api-key-auth.ts';
import { Charge, type BillingStores, type PendingSettlements } from './billing.ts';
import { ChatStream } from './chat-stream.ts';
import type { OpenAiUpstreams, UpstreamResponse } from './upstream-client.ts';
import { malformedUpstreamAnswer, upstreamRefusal } from './upstream-errors.ts';
import { isObject, readUsage, type Json } from './wire.ts';

// POST /v1/chat/completions against an OpenAI-compatible upstream: resolve the model, hold the
// worst-case price, forward the caller's body with the upstream's model id, then settle from the
// usage the upstream reports. Streams are relayed by ChatStream (chat-stream.ts).
//
// A successful call is settled next to sending the answer, not before it: a capture is a few
// ledger round trips the caller gains nothing from waiting for. The settlement is tracked so
// shutdown waits for it. A failed call releases its hold before the error is sent, so a caller
// retrying at once finds its whole balance again.

export interface ChatProxyOptions {
  catalog: Catalog;
  upstreams: OpenAiUpstreams;
  billing: BillingStores;
  settlements: PendingSettlements;
}

export interface CallContext {
  /** Fires when the caller disconnects; cancels the upstream request. */
  signal: AbortSignal;
  log: FastifyBaseLogger;
}

/** A call whose hold is in place and whose upstream answered 2xx. */
export interface StartedChatCall {
  model: ChatModel;
  charge: Charge;
  /** The hold's token counts; its input side is the prompt estimate. */
  holdTokens: TokenCounts;
  response: UpstreamResponse;
}

/** What the upstream reads as prompt: the messages and the tool definitions, as JSON text. */
export function promptCharacters(body: ChatCompletionRequest): number {
  return JSON.stringify(body.messages).length + (body.tools ? JSON.stringify(body.tools).length : 0);
}

export function upstreamChatBody(model: ChatModel, body: ChatCompletionRequest): Json {
  const forwarded: Json = { ...body, model: model.upstream_model };
  // Billing needs the usage chunk; chat-stream.ts hides it again from callers that did not ask.
  if (body.stream === true) forwarded.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
  return forwarded;
}

/** Output characters of a completion, for pricing an answer that came without usage. */
function completionCharacters(completion: Json): number {
  let characters = 0;
  for (const choice of Array.isArray(completion.choices) ? completion.choices : []) {
    const message = isObject(choice) ? choice.message : undefined;
    if (!isObject(message)) continue;
    if (typeof message.content === 'string') characters += message.content.length;
    for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
      if (isObject(call) && isObject(call.function)) characters += JSON.stringify(call.function).length;
    }
  }
  return characters;
}

export class ChatProxy {
  constructor(private readonly options: ChatProxyOptions) {}

  /** A non-streamed completion: the upstream's JSON text, answering with the caller's model id. */
  async complete(principal: Principal, body: ChatCompletionRequest, context: CallContext): Promise<string> {
    const { model, charge, holdTokens, response } = await this.start(principal, body, context, 'application/json');
    let text: string;
    let completion: unknown;
    try {
      text = await response.body.text();
      completion = JSON.parse(text);
    } catch (error) {
      await charge.release();
      if (context.signal.aborted) throw error;
      throw malformedUpstreamAnswer('chat completion');
    }
    if (!isObject(completion)) {
      await charge.release();
      throw malformedUpstreamAnswer('chat completion');
    }
    const reported = readUsage(completion.usage);
    const tokens = reported ?? { inputTokens: holdTokens.inputTokens, outputTokens: estimateTokens(completionCharacters(completion)) };
    this.options.settlements.track(charge.capture(chatPriceMicros(model, tokens), tokens, { allowOverage: reported !== undefined }));
    if (completion.model === model.id) return text;
    return JSON.stringify({ ...completion, model: model.id });
  }

  /** Starts a streamed completion. Errors before the upstream's first byte are thrown (and
   * answered as JSON); from then on the stream settles and ends itself. */
  async openStream(principal: Principal, body: ChatCompletionRequest, context: CallContext): Promise<ChatStream> {
    const started = await this.start(principal, body, context, 'text/event-stream');
    return new ChatStream(started, {
      forwardUsage: body.stream_options?.include_usage === true,
      signal: context.signal,
      log: context.log,
      settlements: this.options.settlements,
    });
  }

  private async start(principal: Principal, body: ChatCompletionRequest, context: CallContext, accept: string): Promise<StartedChatCall> {
    const model = resolveModel(this.options.catalog, principal, body.model, 'chat');
    const holdTokens = chatHoldTokens(model, {
      promptCharacters: promptCharacters(body),
      max_tokens: body.max_tokens,
      max_completion_tokens: body.max_completion_tokens,
      n: body.n,
    });
    // A fresh reference, never the caller-controllable x-request-id: the ledger deduplicates by
    // reference, so a reused one would skip the hold of the second call.
    const reference = newId('req');
    context.log.debug({ reference, model: model.id }, 'chat call billed under reference');
    const charge = await Charge.hold(this.options.billing, { principal, reference, modelId: model.id, kind: 'chat' }, chatPriceMicros(model, holdTokens), context.log);
    try {
      const response = await this.options.upstreams.postJson(model.upstream, '/chat/completions', upstreamChatBody(model, body), { signal: context.signal, accept });
      if (response.statusCode < 200 || response.statusCode >= 300) throw await upstreamRefusal(response);
      return { model, charge, holdTokens, response };
    } catch (error) {
      await charge.release();
      throw error;
    }
  }
}
