import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import { choiceCallId, type ChatAnswer } from './chat-replies.ts';
import { choiceLogprobs, type ChoiceLogprobs } from './logprobs.ts';

// Server-sent events in OpenAI's chat.completion.chunk format. The stream notices when the
// client goes away and stops at once: that is what lets a test prove that the gateway
// cancels its upstream request when its own caller disconnects.

export interface CompletionIdentity {
  id: string;
  created: number;
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface StreamSettings extends CompletionIdentity {
  usage: Usage;
  /** How many choices (`n`): each piece goes out once per choice, in index order. */
  choices: number;
  includeUsage: boolean;
  /** top_logprobs for each piece's chunk; undefined when logprobs were not asked for. */
  logprobs?: number;
  gapMs: number;
  /** Drop the connection after this many pieces, unfinished ([sim:break_after=N]). */
  breakAfter?: number;
  /** Aborted when the client disconnects before the stream ends. */
  signal: AbortSignal;
}

export const systemFingerprint = 'fp_simulator';

/** Streams the simulator broke off itself: their close is not the client leaving. */
const brokenOff = new WeakSet<ServerResponse>();

/** Aborts the returned signal, and calls `onAbandoned` once, if the client leaves before the end. */
export function watchClient(response: ServerResponse, onAbandoned: () => void): AbortSignal {
  const controller = new AbortController();
  response.on('close', () => {
    if (response.writableFinished || brokenOff.has(response)) return;
    onAbandoned();
    controller.abort();
  });
  return controller.signal;
}

/** Waits, unless the client leaves first; false means it left. */
export async function pause(milliseconds: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  if (milliseconds <= 0) return true;
  try {
    await sleep(milliseconds, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

function firstDelta(answer: ChatAnswer, index: number) {
  if (answer.kind === 'text') return { role: 'assistant', content: '', refusal: null };
  return {
    role: 'assistant',
    content: null,
    tool_calls: [{ index: 0, id: choiceCallId(answer.callId, index), type: 'function', function: { name: answer.name, arguments: '' } }],
  };
}

function pieceDelta(answer: ChatAnswer, piece: string) {
  return answer.kind === 'text' ? { content: piece } : { tool_calls: [{ index: 0, function: { arguments: piece } }] };
}

/** A provider failing mid-answer: what was written goes out, then the connection drops. */
function breakOff(response: ServerResponse): void {
  brokenOff.add(response);
  response.socket?.end(() => response.destroy());
}

export async function streamAnswer(reply: FastifyReply, answer: ChatAnswer, settings: StreamSettings): Promise<void> {
  reply.hijack();
  const response = reply.raw;
  response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const identity = { id: settings.id, object: 'chat.completion.chunk', created: settings.created, model: settings.model, system_fingerprint: systemFingerprint };
  // With include_usage OpenAI sends `usage: null` on every chunk before the usage chunk.
  const usageField = settings.includeUsage ? { usage: null } : {};
  const send = (payload: object) => response.write(`data: ${JSON.stringify(payload)}\n\n`);
  // One chunk per choice, as OpenAI sends them for n > 1.
  const chunk = (delta: object | ((index: number) => object), finishReason: string | null = null, logprobs: ChoiceLogprobs | null = null) => {
    for (let index = 0; index < settings.choices; index++) {
      const choiceDelta = typeof delta === 'function' ? delta(index) : delta;
      send({ ...identity, choices: [{ index, delta: choiceDelta, logprobs, finish_reason: finishReason }], ...usageField });
    }
  };
  // Each text piece carries its own token's logprobs.
  const withLogprobs = settings.logprobs !== undefined && answer.kind === 'text' ? settings.logprobs : undefined;

  chunk((index) => firstDelta(answer, index));
  for (const [position, piece] of answer.pieces.entries()) {
    if (position === settings.breakAfter) return breakOff(response);
    if (!(await pause(settings.gapMs, settings.signal))) return;
    chunk(pieceDelta(answer, piece), null, withLogprobs === undefined ? null : choiceLogprobs([piece], withLogprobs, position));
  }
  if (settings.breakAfter !== undefined && settings.breakAfter >= answer.pieces.length) return breakOff(response);
  chunk({}, answer.finishReason);
  if (settings.includeUsage) send({ ...identity, choices: [], usage: settings.usage });
  response.end('data: [DONE]\n\n');
}
