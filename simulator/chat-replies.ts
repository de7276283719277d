import { randomBytes } from 'node:crypto';
import { messageText, lastUserText, type ChatCompletionBody, type ChatMessage, type FunctionTool } from './chat-request.ts';
import { stripMarkers, type Markers } from './markers.ts';
import { countTokens } from './tokens.ts';
import { sampleArguments } from './tool-arguments.ts';

// Decides what the simulated model answers, deterministically, as a list of pieces: the
// streaming route sends one chunk per piece and the non-streaming route joins them, so both
// report the same usage. A prompt token is one whitespace-separated word; a completion token
// is one piece (a word of text, a fragment of tool arguments): crude, but stable and easy to
// predict in a test.

export type ChatAnswer =
  | { kind: 'text'; pieces: string[]; finishReason: 'stop' | 'length' }
  | { kind: 'tool_call'; callId: string; name: string; argumentsJson: string; pieces: string[] };

export type PlannedAnswer = { ok: true; answer: ChatAnswer } | { ok: false; message: string; param: string };

// Echoing the whole prompt back would make long-context benchmarks stream for minutes.
const echoedWords = 40;
// Streamed tool arguments arrive in small fragments, as from the real API.
const argumentPieceLength = 8;

export function promptTokens(messages: ChatMessage[]): number {
  return messages.reduce((total, message) => total + countTokens(messageText(message)), 0);
}

function wordPieces(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [];
}

function replyText(messages: ChatMessage[]): string {
  const last = messages.at(-1);
  if (last?.role === 'tool') return `The tool returned: ${messageText(last)}`;
  const words = stripMarkers(lastUserText(messages)).split(' ').filter(Boolean);
  if (words.length === 0) return 'This is a simulated reply.';
  const echo = words.slice(0, echoedWords).join(' ');
  return `This is a simulated reply to: ${echo}${words.length > echoedWords ? ' …' : ''}`;
}

/** The tool to call, or undefined when the model should answer in text. */
function chosenTool(body: ChatCompletionBody): { tool?: FunctionTool; unknownName?: string } {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? 'auto';
  // After a tool result the model reports back instead of calling again, ending the loop.
  if (tools.length === 0 || choice === 'none' || body.messages.at(-1)?.role === 'tool') return {};
  if (typeof choice === 'object') {
    const named = tools.find((tool) => tool.function.name === choice.function.name);
    return named ? { tool: named } : { unknownName: choice.function.name };
  }
  return { tool: tools[0] };
}

export function planAnswer(body: ChatCompletionBody, markers: Markers): PlannedAnswer {
  const { tool, unknownName } = chosenTool(body);
  if (unknownName !== undefined) {
    return { ok: false, message: `tool_choice names '${unknownName}', which is not among the tools.`, param: 'tool_choice' };
  }
  if (tool) {
    const argumentsJson = JSON.stringify(sampleArguments(tool.function.parameters));
    const pieces: string[] = [];
    for (let offset = 0; offset < argumentsJson.length; offset += argumentPieceLength) {
      pieces.push(argumentsJson.slice(offset, offset + argumentPieceLength));
    }
    return { ok: true, answer: { kind: 'tool_call', callId: `call_${randomBytes(12).toString('hex')}`, name: tool.function.name, argumentsJson, pieces } };
  }

  let pieces = wordPieces(replyText(body.messages));
  if (markers.chunks !== undefined) {
    const words = pieces.map((piece) => piece.trim());
    pieces = Array.from({ length: markers.chunks }, (_, index) => `${index === 0 ? '' : ' '}${words[index % words.length]}`);
  }
  const limit = body.max_completion_tokens ?? body.max_tokens;
  if (limit !== undefined && limit !== null && pieces.length > limit) {
    return { ok: true, answer: { kind: 'text', pieces: pieces.slice(0, limit), finishReason: 'length' } };
  }
  return { ok: true, answer: { kind: 'text', pieces, finishReason: 'stop' } };
}

/** One token per piece, for each of the `choices`: what the stream sends is what usage
 * reports. */
export function completionTokens(answer: ChatAnswer, choices = 1): number {
  return answer.pieces.length * choices;
}
