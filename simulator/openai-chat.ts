import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { choiceCallId, completionTokens, planAnswer, promptTokens, type ChatAnswer } from './chat-replies.ts';
import { chatCompletionBody, lastUserText } from './chat-request.ts';
import { pause, streamAnswer, systemFingerprint, watchClient, type CompletionIdentity, type Usage } from './chat-stream.ts';
import { choiceLogprobs } from './logprobs.ts';
import { parseMarkers } from './markers.ts';
import { sendOpenAiError } from './openai-errors.ts';
import type { SimulatorStats } from './stats.ts';
import { firstProblem } from './validation.ts';
import type { Clock } from './video-tasks.ts';

// OpenAI's chat completions, answered deterministically (see chat-replies.ts), as one JSON
// object or as a stream. Markers in the last user message steer delays, chunking and errors.

export interface ChatOptions {
  stats: SimulatorStats;
  clock: Clock;
}

// What [sim:slow] means: slow enough for a test to disconnect mid-stream reliably.
const slowGapMs = 200;

/** The answer's message; a tool call cut short at max_tokens keeps the arguments it got to, as
 * on OpenAI (they are then no whole JSON). */
function assistantMessage(answer: ChatAnswer, index: number) {
  if (answer.kind === 'text') return { role: 'assistant', content: answer.pieces.join(''), refusal: null };
  return {
    role: 'assistant',
    content: null,
    refusal: null,
    tool_calls: [{ id: choiceCallId(answer.callId, index), type: 'function', function: { name: answer.name, arguments: answer.pieces.join('') } }],
  };
}

/** The top_logprobs asked for, or undefined without logprobs. */
type LogprobsAsked = number | undefined;

function completionObject(identity: CompletionIdentity, answer: ChatAnswer, choices: number, usage: Usage, logprobs: LogprobsAsked) {
  return {
    ...identity,
    object: 'chat.completion',
    system_fingerprint: systemFingerprint,
    // `n` choices, all the same answer: the simulator is deterministic.
    choices: Array.from({ length: choices }, (_unused, index) => ({
      index,
      message: assistantMessage(answer, index),
      logprobs: logprobs !== undefined && answer.kind === 'text' ? choiceLogprobs(answer.pieces, logprobs) : null,
      finish_reason: answer.finishReason,
    })),
    usage,
  };
}

export async function chatRoutes(app: FastifyInstance, options: ChatOptions): Promise<void> {
  const { stats, clock } = options;

  // As OpenAI, which takes images inline as base64 up to 20 MB each: the gateway's own limit
  // (CHAT_BODY_LIMIT_BYTES) is what a caller meets, not this one.
  app.post('/chat/completions', { bodyLimit: 64 * 1_048_576 }, async (request, reply) => {
    stats.chatRequests++;
    const parsed = chatCompletionBody.safeParse(request.body);
    if (!parsed.success) {
      const problem = firstProblem(parsed.error);
      return sendOpenAiError(reply, 400, problem.message, { param: problem.param });
    }
    const body = parsed.data;
    const streaming = body.stream === true;
    const markers = parseMarkers(lastUserText(body.messages));
    const signal = watchClient(reply.raw, () => {
      if (streaming) stats.chatStreamsAborted++;
    });

    if (!(await pause(markers.delayMs ?? 0, signal))) {
      // The client is gone; there is nobody to answer.
      reply.hijack();
      return;
    }
    if (markers.errorStatus !== undefined) {
      return sendOpenAiError(reply, markers.errorStatus, `Simulated upstream error ${markers.errorStatus} ([sim:error=${markers.errorStatus}] in the last user message).`, markers.errorCode ? { code: markers.errorCode } : {});
    }
    const planned = planAnswer(body, markers);
    if (!planned.ok) return sendOpenAiError(reply, 400, planned.message, { param: planned.param });

    const prompt = promptTokens(body.messages);
    const choices = body.n ?? 1;
    const completion = completionTokens(planned.answer, choices);
    const usage: Usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
    const identity: CompletionIdentity = { id: `chatcmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(clock() / 1000), model: body.model };
    const logprobs: LogprobsAsked = body.logprobs === true ? (body.top_logprobs ?? 0) : undefined;
    if (!streaming) return completionObject(identity, planned.answer, choices, usage, logprobs);

    await streamAnswer(reply, planned.answer, {
      ...identity,
      usage,
      choices,
      includeUsage: body.stream_options?.include_usage === true,
      logprobs,
      gapMs: markers.gapMs ?? (markers.slow ? slowGapMs : 0),
      ...(markers.breakAfter !== undefined ? { breakAfter: markers.breakAfter } : {}),
      signal,
    });
  });
}
