import type { EventSourceMessage } from 'eventsource-parser';
import type { TokenCounts } from '../../../core/chat-pricing.ts';
import { carriesSound, outputCharacters } from './output-characters.ts';
import { isObject, readUsage } from './wire.ts';

// What the caller is sent for each event of an upstream chat stream (sse-relay.ts relays the
// stream): the chunk as the upstream wrote it, or rewritten (the caller's model id, the usage
// the gateway asked for and the caller did not cut out), or nothing; and what the event tells
// the gateway (the usage it bills from, the text delivered, the answer's end, a failure).

export interface DeliveredText {
  /** Chunks that carried output (text, reasoning, a tool or function call's name and
   * arguments, audio): about one token each. */
  pieces: number;
  characters: number;
}

export interface RelayState {
  usage?: TokenCounts;
  delivered: DeliveredText;
  sawDone: boolean;
  /** The choices the caller asked for (`n`): an answer is whole once that many finished. */
  expectedChoices: number;
  /** Each choice index seen, and whether that choice finished. */
  choices: Map<number, boolean>;
  /** Choices seen that have not finished yet. */
  unfinishedChoices: number;
  failure?: string;
  providerMessage?: string;
}

/** An SSE data event; a multi-line payload becomes several data lines. */
export function sseData(data: string): string {
  return data.includes('\n') ? `${data.split('\n').map((line) => `data: ${line}`).join('\n')}\n\n` : `data: ${data}\n\n`;
}

function describeError(error: unknown): string {
  if (isObject(error) && typeof error.message === 'string') return error.message;
  return typeof error === 'string' ? error : 'the model provider reported an error';
}

export function newRelayState(expectedChoices: number): RelayState {
  return { delivered: { pieces: 0, characters: 0 }, sawDone: false, expectedChoices, choices: new Map(), unfinishedChoices: 0 };
}

/** Every choice asked for has come and finished: the answer is whole, `[DONE]` or not. With
 * `n` above 1 one choice finishing says nothing of the others, nor of a choice not begun. */
export function allChoicesFinished(state: RelayState): boolean {
  return state.choices.size >= state.expectedChoices && state.unfinishedChoices === 0;
}

function noteFinish(choice: Record<string, unknown>, state: RelayState): void {
  const index = typeof choice.index === 'number' ? choice.index : 0;
  const finishedBefore = state.choices.get(index);
  const finishes = Boolean(choice.finish_reason);
  if (finishedBefore === undefined) {
    state.choices.set(index, finishes);
    if (!finishes) state.unfinishedChoices++;
  } else if (!finishedBefore && finishes) {
    state.choices.set(index, true);
    state.unfinishedChoices--;
  }
}

function countDelivered(choices: unknown[], state: RelayState): void {
  for (const choice of choices) {
    if (!isObject(choice)) continue;
    noteFinish(choice, state);
    const delta = choice.delta;
    if (!isObject(delta)) continue;
    const characters = outputCharacters(delta);
    if (characters > 0 || carriesSound(delta)) {
      state.delivered.pieces++;
      state.delivered.characters += characters;
    }
  }
}

/** The provider reported a failure in its stream: the caller gets the gateway's words. */
function providerFailed(state: RelayState, said: unknown): '' {
  state.failure = 'it reported an error';
  state.providerMessage = describeError(said);
  return '';
}

/** What to send the caller for one upstream event ('' to send nothing). */
export function translate(event: EventSourceMessage, state: RelayState, forwardUsage: boolean, modelId: string): string {
  const { data } = event;
  // As the openai clients read it: '[DONE] ' ends a stream too.
  if (data.startsWith('[DONE]')) {
    state.sawDone = true;
    return '';
  }
  // A chat stream is chunks of JSON: anything else would break the caller's client at that
  // line (the openai package throws a SyntaxError), so it ends the stream as a failure; or,
  // after every choice finished, as the whole answer it is (a stray empty event, say).
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    if (event.event === 'error') return providerFailed(state, data);
    if (allChoicesFinished(state)) {
      state.sawDone = true;
      return '';
    }
    state.failure = 'the model provider sent an event that is not JSON';
    return '';
  }
  if (event.event === 'error') return providerFailed(state, isObject(chunk) && chunk.error !== undefined ? chunk.error : chunk);
  if (!isObject(chunk)) {
    state.failure = 'the model provider sent an event that is not a chat completion chunk';
    return '';
  }
  if (chunk.error !== undefined && chunk.error !== null) return providerFailed(state, chunk.error);
  const usage = readUsage(chunk.usage);
  if (usage) state.usage = usage;
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  // The usage-only chunk comes last, after every choice's finish: the answer is whole, whether
  // or not a `[DONE]` follows (an upstream that keeps its body open after it without one would
  // otherwise turn a whole answer into a failure at the body timeout).
  if (usage && choices.length === 0 && allChoicesFinished(state)) state.sawDone = true;
  // The usage the gateway asked for, which the caller did not: a usage-only chunk goes (even
  // one whose counts could not be read), and usage on another chunk is cut out of it.
  const hideUsage = !forwardUsage && chunk.usage !== undefined && chunk.usage !== null;
  if (hideUsage && choices.length === 0) return '';
  countDelivered(choices, state);
  // Usage on the last choice's finishing chunk: whole as well (as a usage-only chunk after it).
  if (usage && choices.length > 0 && allChoicesFinished(state)) state.sawDone = true;
  const renamed = typeof chunk.model === 'string' && chunk.model !== modelId;
  if (renamed || hideUsage) {
    if (renamed) chunk.model = modelId;
    // Rewritten anyway: a `usage: null` the caller did not ask for goes too.
    if (!forwardUsage) delete chunk.usage;
    return `data: ${JSON.stringify(chunk)}\n\n`;
  }
  // Once usage is asked for, every chunk carries `usage: null`, which OpenAI sends only to a
  // caller who asked: it is cut out of the text, as a stringify a chunk would cost more.
  if (!forwardUsage && chunk.usage === null) {
    const trimmed = withoutNullUsage(data);
    if (trimmed === undefined) {
      delete chunk.usage;
      return `data: ${JSON.stringify(chunk)}\n\n`;
    }
    return sseData(trimmed);
  }
  return sseData(data);
}

const NULL_USAGE = /"usage"\s*:\s*null\s*/y;

/** The chunk's JSON text without its top-level `"usage": null` member, or undefined when the
 * text does not tell which member that is without a parse: `"usage"` found more than once, or a
 * `\u` escape in the text (a key may be spelt `"us\u0061ge"`, and then the one found is not it).
 * Otherwise the top-level key is spelt out, so it is the one `"usage"` found. */
export function withoutNullUsage(json: string): string | undefined {
  const at = json.indexOf('"usage"');
  if (at < 0 || json.indexOf('"usage"', at + 1) >= 0 || json.includes('\\u')) return undefined;
  NULL_USAGE.lastIndex = at;
  const member = NULL_USAGE.exec(json);
  if (!member) return undefined;
  let start = at;
  let end = at + member[0].length;
  let before = start - 1;
  while (before >= 0 && /\s/.test(json[before]!)) before--;
  if (json[before] === ',') start = before;
  else if (json[end] === ',') end++;
  else return undefined;
  return json.slice(0, start) + json.slice(end);
}

