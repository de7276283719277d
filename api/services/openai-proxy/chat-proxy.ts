import type { FastifyBaseLogger } from 'fastify';
import type { Catalog, ChatModel } from '../../../core/catalog.ts';
import { chatHoldTokens, chatPriceMicros, chatUsageCeiling, estimateTextTokens, estimateTokens, NO_TOKENS, withinCeiling, type TokenCounts } from '../../../core/chat-pricing.ts';
import { GatewayError } from '../../../core/errors.ts';
import { resolveModel } from '../../../core/model-access.ts';
import type { ChatCompletionRequest } from '../../routes/chat/schemas.ts';
import type { Principal } from '../../plugins/api-key-auth.ts';
import type { AccountBudgets } from '../billing/account-budgets.ts';
import type { Reservation } from '../billing/spend-lease.ts';
import { limitHeaders } from '../rate-limits/limit-answers.ts';
import type { RateLimiter, TokenCount } from '../rate-limits/rate-limiter.ts';
import { countChatCharge } from '../../../core/metrics.ts';
import { restoreUnsafeIntegers } from '../../../core/verbatim-integers.ts';
import { ChatStream } from './chat-stream.ts';
import type { ClientDisconnect } from './client-disconnect.ts';
import type { OpenAiUpstreams, UpstreamResponse } from './upstream-client.ts';
import { refuseUnpricedAudio } from './chat-audio.ts';
import { errorInSuccessfulAnswer, malformedUpstreamAnswer, streamedRefusal } from './upstream-errors.ts';
import { isObject, readUsage, type Json } from './wire.ts';
import { outputCharacters } from './output-characters.ts';

// POST /v1/chat/completions against an OpenAI-compatible upstream: resolve the model, reserve
// the worst-case price, forward the caller's body with the upstream's model id, then charge from
// the usage the upstream reports. Streams are relayed by ChatStream (chat-stream.ts).
//
// The reservation comes from the account's spend lease (../billing/account-budgets.ts), in
// memory: the ledger learns of the call when the lease settles, so no store round trip sits
// between the caller and the upstream. A failed call releases its reservation before the error
// is sent, so a caller retrying at once finds the whole amount again.

export interface ChatProxyOptions {
  catalog: Catalog;
  upstreams: OpenAiUpstreams;
  budgets: AccountBudgets;
  limiter?: RateLimiter;
}

export interface CallContext {
  /** Fires when the caller disconnects; cancels the upstream request. */
  signal: ClientDisconnect;
  log: FastifyBaseLogger;
  /** Adds headers to the answer (the token rate-limit headers). */
  setHeaders?: (headers: Record<string, string>) => void;
  /** performance.now() when the request arrived, for the time-to-first-token metric. */
  receivedAt?: number;
}

/** A call whose reservation is in place. */
interface AdmittedChatCall {
  model: ChatModel;
  reservation: Reservation;
  /** Corrects the call's count against its key's tokens per minute to what it used; only the
   * first call counts, so ending paths can call it with NO_TOKENS after a charge. */
  countTokens: (tokens: TokenCounts) => void;
  /** The reservation's token counts; its input side is the prompt estimate. */
  holdTokens: TokenCounts;
  /** The most the call can have used (core/chat-pricing.ts chatUsageCeiling). */
  ceiling: TokenCounts;
}

/** A streamed call whose upstream answered 2xx. */
export interface StartedChatCall extends AdmittedChatCall {
  response: UpstreamResponse;
}

/** Image parts of the messages, the characters of their URLs (a data: URL can be megabytes of
 * base64 that the provider bills as one image), and whether some part is neither text nor an
 * image (a file, audio): the provider bills those by what it extracts (a PDF page's text and
 * its image), which the request's bytes do not bound. */
function imagesIn(messages: ChatCompletionRequest['messages']): { images: number; urlCharacters: number; unboundedParts: boolean } {
  let images = 0;
  let urlCharacters = 0;
  let unboundedParts = false;
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as Json[]) {
      if (part.type !== 'image_url') {
        if (part.type !== 'text' && part.type !== 'refusal') unboundedParts = true;
        continue;
      }
      images += 1;
      const imageUrl = part.image_url;
      const url = typeof imageUrl === 'string' ? imageUrl : isObject(imageUrl) ? imageUrl.url : undefined;
      if (typeof url === 'string') urlCharacters += url.length;
    }
  }
  return { images, urlCharacters, unboundedParts };
}

/** The body sent upstream, as JSON text, with the caller's parameters and the upstream's model
 * id, and the input tokens it may cost: the reservation is estimated from all of it (the
 * messages, tools, `functions`, a `response_format` schema, a `prediction`: the provider bills
 * whatever it reads), its images at the model's `image_input_tokens` each. The prompt is
 * serialised once, and spliced in: with a long conversation it is most of the text. */
export function upstreamChatRequest(model: ChatModel, body: ChatCompletionRequest): { payload: string; promptTokens: number; leastPromptTokens: number; mostPromptTokens: number; bodyBytes: number; images: number; unboundedParts: boolean } {
  const { messages, tools, ...rest } = body;
  const others: Json = { ...rest, model: model.upstream_model };
  // Billing needs the usage chunk; chat-stream.ts hides it again from callers that did not ask.
  if (body.stream === true) others.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
  if (tools === null) others.tools = null;
  const messagesJson = JSON.stringify(messages);
  const toolsJson = tools ? JSON.stringify(tools) : undefined;
  // `others` always has the model, so its text is `{"…":…}` and never `{}`.
  // Integers too large for a number stand in as VerbatimIntegers until here (core/verbatim-integers.ts).
  const payload = restoreUnsafeIntegers(`{"messages":${messagesJson}${toolsJson === undefined ? '' : `,"tools":${toolsJson}`},${JSON.stringify(others).slice(1)}`);
  const { images, urlCharacters, unboundedParts } = imagesIn(messages);
  const bodyBytes = Buffer.byteLength(payload);
  return {
    payload,
    promptTokens: estimateTextTokens(payload, urlCharacters, bodyBytes) + images * model.image_input_tokens,
    // What the prompt costs at the least: its text at 4 characters a token (CJK runs 1 to 1.5
    // tokens a character), its images at nothing. The estimate above is the most, for holds;
    // a call refused for good must be too large by this one (rate-limiter.ts tooLarge).
    leastPromptTokens: estimateTokens(Math.max(0, payload.length - urlCharacters)),
    // And what it can cost at the most: a token a byte of its text (a BPE token covers at least
    // one), its images at the model's tokens each. Money is held for this (admit, below).
    mostPromptTokens: Math.max(0, bodyBytes - urlCharacters) + images * model.image_input_tokens,
    bodyBytes,
    images,
    unboundedParts,
  };
}

/** Output characters of a completion, for pricing an answer that came without usage. */
function completionCharacters(completion: Json): number {
  let characters = 0;
  for (const choice of Array.isArray(completion.choices) ? completion.choices : []) {
    const message = isObject(choice) ? choice.message : undefined;
    if (isObject(message)) characters += outputCharacters(message);
  }
  return characters;
}

/** Charges a call its prompt estimate and no output: the caller left after the provider had
 * the request, before any output reached them. */
export function chargePromptOnly(call: AdmittedChatCall): void {
  const tokens: TokenCounts = { inputTokens: call.holdTokens.inputTokens, outputTokens: 0 };
  countChatCharge(call.model.id, tokens, call.reservation.charge(chatPriceMicros(call.model, tokens), tokens, { allowOverage: false }));
  call.countTokens(tokens);
}

/** The usage an upstream reported, cut to what the call can have used (logged when cut). */
export function reportedWithin(call: { model: ChatModel; ceiling: TokenCounts }, reported: TokenCounts, log: Pick<FastifyBaseLogger, 'warn'>): TokenCounts {
  const { tokens, cut } = withinCeiling(reported, call.ceiling);
  if (cut) log.warn({ model: call.model.id, reported, charged: tokens }, 'the model provider reported more tokens than the call can have used; charged at most what it can');
  return tokens;
}

/** A 400 for an output limit above the model's, as OpenAI answers one: the hold covers the
 * model's limit, so more could be billed than the balance that admitted the call. */
function refuseOutputLimitAboveModel(model: ChatModel, body: ChatCompletionRequest): void {
  for (const field of ['max_completion_tokens', 'max_tokens'] as const) {
    const asked = body[field];
    if (typeof asked === 'number' && asked > model.max_output_tokens) {
      throw new GatewayError('invalid_request', `${field} is too large: ${asked}. The model '${model.id}' makes at most ${model.max_output_tokens} output tokens.`, field);
    }
  }
}

export class ChatProxy {
  constructor(private readonly options: ChatProxyOptions) {}

  /** A non-streamed completion: the upstream's JSON text, answering with the caller's model id. */
  async complete(principal: Principal, body: ChatCompletionRequest, context: CallContext): Promise<string> {
    const { call, payload } = await this.admit(principal, body, context);
    const { model, reservation, holdTokens, countTokens } = call;
    let completion: unknown;
    let text: string;
    try {
      ({ text, json: completion } = await this.options.upstreams.postForJson(model.upstream, '/chat/completions', payload, { signal: context.signal, what: 'chat completion' }));
      if (!isObject(completion)) throw malformedUpstreamAnswer('chat completion');
      if (completion.error !== undefined && completion.error !== null && !Array.isArray(completion.choices)) throw errorInSuccessfulAnswer('chat completion', completion.error);
    } catch (error) {
      // A caller who left once the provider had the request pays for its prompt (the provider
      // bills it): else a large prompt abandoned at once was free, as often as anyone liked.
      if (context.signal.callerGone && context.signal.requestSent) chargePromptOnly(call);
      reservation.release();
      countTokens(NO_TOKENS);
      throw error;
    }
    try {
      const reported = readUsage(completion.usage);
      const tokens = reported ? reportedWithin(call, reported, context.log) : { inputTokens: holdTokens.inputTokens, outputTokens: estimateTokens(completionCharacters(completion)) };
      countChatCharge(model.id, tokens, reservation.charge(chatPriceMicros(model, tokens), tokens, { allowOverage: reported !== undefined }));
      countTokens(tokens);
    } finally {
      // A reservation left unsettled would keep its lease from ever settling.
      reservation.release();
      countTokens(NO_TOKENS);
    }
    if (completion.model === model.id) return text;
    return JSON.stringify({ ...completion, model: model.id });
  }

  /** Starts a streamed completion. Errors before the upstream's first byte are thrown (and
   * answered as JSON); from then on the stream settles and ends itself. */
  async openStream(principal: Principal, body: ChatCompletionRequest, context: CallContext): Promise<ChatStream> {
    const { call, payload } = await this.admit(principal, body, context);
    const { model, reservation, countTokens } = call;
    let response: UpstreamResponse | undefined;
    try {
      response = await this.options.upstreams.postJson(model.upstream, '/chat/completions', payload, { signal: context.signal, accept: 'text/event-stream' });
      if (response.statusCode < 200 || response.statusCode >= 300) throw await streamedRefusal(response, model.upstream);
    } catch (error) {
      // As for a whole answer: a caller who left once the provider had the request pays its
      // prompt; not one who left while a refusal was being read (the provider refused it).
      if (context.signal.callerGone && context.signal.requestSent && response === undefined) chargePromptOnly(call);
      reservation.release();
      countTokens(NO_TOKENS);
      throw error;
    }
    return new ChatStream({ ...call, response }, {
      forwardUsage: body.stream_options?.include_usage === true,
      choices: body.n ?? 1,
      signal: context.signal,
      log: context.log,
      receivedAt: context.receivedAt ?? performance.now(),
      maxCallerStallMs: this.options.upstreams.bodyTimeoutMs,
    });
  }

  /** The refusals the body and the key decide alone (the model the key may not use, an output
   * limit above the model's, audio the catalog cannot price): the model when none applies. The
   * route asks before it resolves media names, so such a call is refused at once rather than
   * after a DNS wait (a 503 from a silent zone, then this refusal on the retry). */
  refuseUnservable(principal: Principal, body: ChatCompletionRequest): ChatModel {
    const model = resolveModel(this.options.catalog, principal, body.model, 'chat');
    refuseOutputLimitAboveModel(model, body);
    refuseUnpricedAudio(model, body);
    return model;
  }

  /** Resolves the model, passes the token limit and reserves the call's worst-case price; with
   * the body for the upstream as JSON text, kept apart so a stream holds no copy of the prompt. */
  private async admit(principal: Principal, body: ChatCompletionRequest, context: CallContext): Promise<{ call: AdmittedChatCall; payload: string }> {
    const model = this.refuseUnservable(principal, body);
    const { payload, promptTokens, leastPromptTokens, mostPromptTokens, bodyBytes, images, unboundedParts } = upstreamChatRequest(model, body);
    const prediction = (body as { prediction?: unknown }).prediction;
    const predictionBytes = prediction === undefined || prediction === null ? 0 : Buffer.byteLength(JSON.stringify(prediction));
    const holdTokens = chatHoldTokens(model, { promptTokens, max_tokens: body.max_tokens, max_completion_tokens: body.max_completion_tokens, n: body.n, predictionBytes });
    const { limiter } = this.options;
    let tokenCount: TokenCount | undefined;
    if (limiter) {
      // Counted for its prompt estimate, not its output limit: what a call gives back when it ends
      // stays with this process (other api processes cannot use it), so counting a max_tokens of
      // thousands at admission left most of a minute to one process.
      tokenCount = await limiter.admitTokens(principal, holdTokens.inputTokens, undefined, leastPromptTokens);
      context.setHeaders?.(limitHeaders('tokens', tokenCount.status));
    }
    let counted = false;
    const countTokens = (tokens: TokenCounts) => {
      if (counted || !tokenCount) return;
      counted = true;
      limiter!.settleTokens(principal, tokenCount, tokens.inputTokens + tokens.outputTokens);
    };
    let reservation: Reservation;
    try {
      // Held for the prompt's most, not its estimate: the upstream's usage is charged as
      // reported, and an estimate short of it (text of short words, digits, code: 2 to 3
      // characters a token) was charged beyond the hold, from a balance that may not have it.
      // Parallel calls on an account's last cents then got more than the balance paid for
      // (1.8 times, in a review's test).
      // A file or audio part has no most (core/chat-pricing.ts): its estimate is held.
      const heldTokens = { inputTokens: unboundedParts ? holdTokens.inputTokens : Math.max(holdTokens.inputTokens, mostPromptTokens), outputTokens: holdTokens.outputTokens };
      reservation = await this.options.budgets.reserve(
        principal.accountId,
        chatPriceMicros(model, heldTokens),
        { keyId: principal.keyId, modelId: model.id, kind: 'chat' },
        'or lower max_tokens (or shorten the prompt: it is held at a token a byte)',
      );
    } catch (error) {
      // Refused (balance) or unable to reserve: the call uses no tokens.
      countTokens(NO_TOKENS);
      throw error;
    }
    const ceiling = chatUsageCeiling(model, { bodyBytes, images, unboundedParts }, holdTokens.outputTokens);
    return { call: { model, reservation, holdTokens, ceiling, countTokens }, payload };
  }
}
