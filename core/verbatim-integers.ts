import { randomBytes } from 'node:crypto';

// Integers in a proxied body that a JavaScript number cannot hold, carried to the upstream as
// the caller wrote them. JSON.parse turns `"seed": 9223372036854775807` (a random int64 seed,
// as Python clients send one) into 9223372036854775808, which no longer fits an int64: the
// upstream refuses a request the caller wrote correctly, or uses another seed. Node 20's
// JSON.parse cannot hand back a number's source text, so such a literal becomes a
// VerbatimInteger in the parsed body, and its text is put back into the JSON sent upstream.
//
// A VerbatimInteger is neither a number nor a string: every field the gateway checks refuses it
// (a 400, as a number that large failed its bounds before), and only parameters passed on as
// they are take it. Numbers with a fraction or an exponent travel as the nearest double, as any
// JavaScript JSON parser reads them.

/** Random per process, and never in anything a caller is shown: it only stands in for a
 * literal between JSON.stringify and restoreUnsafeIntegers. */
const MARKER = `fg-integer-${randomBytes(8).toString('hex')}:`;

/** MAX_SAFE_INTEGER has 16 digits: a body without 16 digits in a row has no unsafe integer. */
const SIXTEEN_DIGITS = /\d{16}/;

const MARKED = new RegExp(`"${MARKER}(-?\\d+)"`, 'g');

/** An integer literal of a request body that no number holds exactly, as written. */
export class VerbatimInteger {
  constructor(readonly literal: string) {}

  /** Its place in JSON text, until restoreUnsafeIntegers puts the literal there. */
  toJSON(): string {
    return `${MARKER}${this.literal}`;
  }
}

const isDigit = (code: number): boolean => code >= 48 && code <= 57;

/** Whether `text` can hold an integer a number cannot: a test, not a pass over it in code. */
export function mayHoldUnsafeIntegers(text: string): boolean {
  return SIXTEEN_DIGITS.test(text);
}

/** `text` (valid JSON) with every integer literal outside strings that a number cannot hold
 * exactly made a marked string; undefined when there is none. */
function markUnsafeIntegers(text: string): string | undefined {
  if (!mayHoldUnsafeIntegers(text)) return undefined;
  let marked = '';
  let copiedUntil = 0;
  let at = 0;
  while (at < text.length) {
    const code = text.charCodeAt(at);
    if (code === 34 /* " */) {
      // A string: digits inside it are text.
      at++;
      while (at < text.length) {
        const inside = text.charCodeAt(at);
        if (inside === 92 /* \ */) at += 2;
        else {
          at++;
          if (inside === 34) break;
        }
      }
      continue;
    }
    if (code !== 45 /* - */ && !isDigit(code)) {
      at++;
      continue;
    }
    const start = at;
    at++;
    while (at < text.length && isDigit(text.charCodeAt(at))) at++;
    const next = text.charCodeAt(at);
    if (next === 46 /* . */ || next === 101 /* e */ || next === 69 /* E */) {
      // A fraction or an exponent: a floating-point number, which a double is meant to hold.
      at++;
      while (at < text.length && (isDigit(text.charCodeAt(at)) || text[at] === '+' || text[at] === '-' || text[at] === 'e' || text[at] === 'E')) at++;
      continue;
    }
    const literal = text.slice(start, at);
    if (Number.isSafeInteger(Number(literal))) continue;
    marked += `${text.slice(copiedUntil, start)}"${MARKER}${literal}"`;
    copiedUntil = at;
  }
  return copiedUntil === 0 ? undefined : marked + text.slice(copiedUntil);
}

/** Marked strings become VerbatimIntegers. A string a caller wrote cannot start with the
 * marker: it is random and never shown. */
function verbatimIntegerFor(_key: string, value: unknown): unknown {
  return typeof value === 'string' && value.startsWith(MARKER) ? new VerbatimInteger(value.slice(MARKER.length)) : value;
}

/**
 * `text` (valid JSON) parsed with a VerbatimInteger for every integer literal a number cannot
 * hold; undefined when it has none, the usual case, found without a pass over the text.
 */
export function parseKeepingUnsafeIntegers(text: string): unknown {
  const marked = markUnsafeIntegers(text);
  return marked === undefined ? undefined : JSON.parse(marked, verbatimIntegerFor);
}

/** JSON text of a body that may hold VerbatimIntegers, with their literals as written. */
export function restoreUnsafeIntegers(json: string): string {
  return json.includes(MARKER) ? json.replace(MARKED, '$1') : json;
}
