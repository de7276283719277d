import { randomBytes } from 'node:crypto';
import { messageText, lastUserText, type ChatCompletionBody, type ChatMessage, type FunctionTool } from './chat-request.ts';
import { stripMarkers, type Markers } from './markers.ts';
import { countTokens } from './tokens.ts';
import { sampleArguments } from './tool-arguments.ts';

// Decides what the simulated model answers, deterministically, as a list of pieces: the
// streaming route sends one chunk per piece and the non-streaming route joins them, so both
// report the same usage. A prompt token is one whitespace-separated word; a completion token
// is one piece (a word of text, a fragment of tool arguments or of a JSON reply): crude, but
// stable and easy to predict in a test. max_completion_tokens (else max_tokens) cuts either kind
// of answer after that many pieces, finishing with `length`, as OpenAI cuts a tool call's
// arguments short.

export type ChatAnswer =
  | { kind: 'text'; pieces: string[]; finishReason: 'stop' | 'length' }
  | { kind: 'tool_call'; callId: string; name: string; pieces: string[]; finishReason: 'tool_calls' | 'length' };

export type PlannedAnswer = { ok: true; answer: ChatAnswer } | { ok: false; message: string; param: string };

// Echoing the whole prompt back would make long-context benchmarks stream for minutes.
const echoedWords = 40;
// Streamed tool arguments arrive in small fragments, as from the real API: this many code
// points each.
const argumentPieceLength = 8;

export function promptTokens(messages: ChatMessage[]): number {
  return messages.reduce((total, message) => total + countTokens(messageText(message)), 0);
}

function wordPieces(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [];
}

/** JSON in fragments of argumentPieceLength characters, as tool arguments and structured
 * replies stream from the real API. Characters are code points, not UTF-16 units: OpenAI never
 * splits an emoji across deltas, and a fragment ending in half of one is a lone surrogate,
 * which a Python client cannot join back into the character. */
function fragments(text: string): string[] {
  const characters = Array.from(text);
  const pieces: string[] = [];
  for (let offset = 0; offset < characters.length; offset += argumentPieceLength) pieces.push(characters.slice(offset, offset + argumentPieceLength).join(''));
  return pieces;
}

/** The text up to the first of the stop sequences, which the reply never includes. */
function cutAtStop(text: string, stop: ChatCompletionBody['stop']): string {
  let end = text.length;
  for (const sequence of typeof stop === 'string' ? [stop] : (stop ?? [])) {
    const at = sequence === '' ? -1 : text.indexOf(sequence);
    if (at !== -1 && at < end) end = at;
  }
  return text.slice(0, end);
}

function replyText(messages: ChatMessage[]): string {
  const last = messages.at(-1);
  if (last?.role === 'tool') return `The tool returned: ${messageText(last)}`;
  const words = stripMarkers(lastUserText(messages)).split(' ').filter(Boolean);
  if (words.length === 0) return 'This is a simulated reply.';
  const echo = words.slice(0, echoedWords).join(' ');
  return `This is a simulated reply to: ${echo}${words.length > echoedWords ? ' …' : ''}`;
}

/** The reply's text: JSON when the request asked for it (a value of its schema for json_schema,
 * the reply under `reply` for json_object), up to the first stop sequence. */
function replyContent(body: ChatCompletionBody): { text: string; json: boolean } {
  const format = body.response_format;
  let text = replyText(body.messages);
  if (format?.type === 'json_schema') text = JSON.stringify(sampleArguments(format.json_schema.schema));
  else if (format?.type === 'json_object') text = JSON.stringify({ reply: text });
  return { text: cutAtStop(text, body.stop), json: format !== undefined && format !== null && format.type !== 'text' };
}

/** The tool to call, or undefined when the model should answer in text. */
function chosenTool(body: ChatCompletionBody): { tool?: FunctionTool; unknownName?: string } {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? 'auto';
  // After a tool result the model reports back instead of calling again, ending the loop.
  if (tools.length === 0 || choice === 'none' || body.messages.at(-1)?.role === 'tool') return {};
  if (typeof choice !== 'object') return { tool: tools[0] };
  if (choice.type === 'function') {
    const named = tools.find((tool) => tool.function.name === choice.function.name);
    return named ? { tool: named } : { unknownName: choice.function.name };
  }
  // allowed_tools: the first of the tools that is allowed; each allowed name must be a tool.
  const allowed = choice.allowed_tools.tools.map((tool) => tool.function.name);
  const unknownName = allowed.find((name) => !tools.some((tool) => tool.function.name === name));
  if (unknownName !== undefined) return { unknownName };
  return { tool: tools.find((tool) => allowed.includes(tool.function.name)) };
}

/** The pieces within max_completion_tokens, else max_tokens, and whether they were cut short. */
function withinLimit(pieces: string[], body: ChatCompletionBody): { pieces: string[]; cut: boolean } {
  const limit = body.max_completion_tokens ?? body.max_tokens;
  if (limit === undefined || limit === null || pieces.length <= limit) return { pieces, cut: false };
  return { pieces: pieces.slice(0, limit), cut: true };
}

export function planAnswer(body: ChatCompletionBody, markers: Markers): PlannedAnswer {
  const { tool, unknownName } = chosenTool(body);
  if (unknownName !== undefined) {
    return { ok: false, message: `tool_choice names '${unknownName}', which is not among the tools.`, param: 'tool_choice' };
  }
  if (tool) {
    const { pieces, cut } = withinLimit(fragments(JSON.stringify(sampleArguments(tool.function.parameters))), body);
    const callId = `call_${randomBytes(12).toString('hex')}`;
    return { ok: true, answer: { kind: 'tool_call', callId, name: tool.function.name, pieces, finishReason: cut ? 'length' : 'tool_calls' } };
  }

  const content = replyContent(body);
  let pieces = content.json ? fragments(content.text) : wordPieces(content.text);
  if (markers.chunks !== undefined && !content.json && pieces.length > 0) {
    const words = pieces.map((piece) => piece.trim());
    pieces = Array.from({ length: markers.chunks }, (_, index) => `${index === 0 ? '' : ' '}${words[index % words.length]}`);
  }
  const limited = withinLimit(pieces, body);
  return { ok: true, answer: { kind: 'text', pieces: limited.pieces, finishReason: limited.cut ? 'length' : 'stop' } };
}

/** The id of the tool call in choice `index`: with `n` choices each call has its own, as on
 * OpenAI, so a client keeping calls by id keeps them apart. */
export function choiceCallId(callId: string, index: number): string {
  return index === 0 ? callId : `${callId}_${index}`;
}

/** One token per piece, for each of the `choices`: what the stream sends is what usage
 * reports. */
export function completionTokens(answer: ChatAnswer, choices = 1): number {
  return answer.pieces.length * choices;
}
