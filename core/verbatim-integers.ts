import { randomBytes } from 'node:crypto';

// Integers in a proxied body that a JavaScript number cannot hold, carried to the upstream as
// the caller wrote them. JSON.parse turns `"seed": 9223372036854775807` (a random int64 seed,
// as Python clients send one) into 9223372036854775808, which no longer fits an int64: the
// upstream refuses a request the caller wrote correctly, or uses another seed. Node 20's
// JSON.parse cannot hand back a number's source text, so such a literal is parsed as a string
// carrying a marker, and the marker is taken out of the JSON text sent upstream.
//
// A parameter the gateway reads as a number (max_tokens, n) then fails its schema, as a
// number that large would fail its bounds anyway.

/** Random per process: a caller cannot write a string the gateway would turn into a number. */
const MARKER = `fg-integer-${randomBytes(8).toString('hex')}:`;

/** MAX_SAFE_INTEGER has 16 digits: a body without 16 digits in a row has no unsafe integer. */
const SIXTEEN_DIGITS = /\d{16}/;

const MARKED = new RegExp(`"${MARKER}(-?\\d+)"`, 'g');

const isDigit = (code: number): boolean => code >= 48 && code <= 57;

/** Whether `text` can hold an integer a number cannot: a test, not a pass over it in code. */
export function mayHoldUnsafeIntegers(text: string): boolean {
  return SIXTEEN_DIGITS.test(text);
}

/**
 * `text` (valid JSON) with every integer literal outside strings that a number cannot hold
 * exactly made a marked string; undefined when there is none, the usual case, found without a
 * pass over the text.
 */
export function markUnsafeIntegers(text: string): string | undefined {
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

/** JSON text of a body parsed from markUnsafeIntegers' text, with its integers as written. */
export function restoreUnsafeIntegers(json: string): string {
  return json.includes(MARKER) ? json.replace(MARKED, '$1') : json;
}
