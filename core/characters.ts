import { z } from 'zod';

// Length limits on text, counted the way the OpenAPI document counts them. JSON Schema's
// maxLength counts characters (code points); zod's .max() counts UTF-16 units, so an emoji
// counts twice and a name of 150 emoji, valid by the document, would be refused. These checks
// count code points and write the same number into the document.

function characterCount(text: string): number {
  let count = 0;
  for (const _character of text) count++;
  return count;
}

/** Words with their indefinite article, for messages: "an image", "a unique-local", "an IPv4-mapped". */
export function withArticle(words: string): string {
  return /^[aeio]|^u(?!ni)|^I/.test(words) ? `an ${words}` : `a ${words}`;
}

/** An id as error messages quote it: a caller's typo in full, a 100 KB string not. */
export function quotedId(id: string): string {
  return id.length > 100 ? `'${id.slice(0, 100)}…'` : `'${id}'`;
}

/** A type error's message: "is required" (and what goes there) when the field is missing,
 * "must be …" when it is there with the wrong type: `"prompt": 5` is not a missing prompt. */
export function requiredAs(what: string, hint = '') {
  return (issue: { input?: unknown }) => (issue.input === undefined ? `is required${hint ? `: ${hint}` : ''}` : `must be ${what}`);
}

/** `schema`, refusing text longer than `max` characters. */
export function atMostCharacters<Schema extends z.ZodString>(schema: Schema, max: number, message: string): Schema {
  return schema.refine((text) => characterCount(text) <= max, message).meta({ maxLength: max }) as Schema;
}

/** `schema`, refusing text shorter than `min` characters. */
export function atLeastCharacters<Schema extends z.ZodString>(schema: Schema, min: number, message: string): Schema {
  return schema.refine((text) => characterCount(text) >= min, message).meta({ minLength: min }) as Schema;
}

// Whitespace exactly as JavaScript's trim() sees it, spelled out: `\s` differs between the
// regex engines that read the OpenAPI document (U+FEFF is whitespace to JavaScript, not to
// Python or Rust), and text of only whitespace must be refused the same way everywhere.
/** The characters of JavaScript's `\s` (what trim() removes), as a regex character-class body. */
export const WHITESPACE_CLASS = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
const NOT_ONLY_WHITESPACE = new RegExp(`[^${WHITESPACE_CLASS}]`);

/** Something besides whitespace, control characters (C0, DEL, C1) and the invisible format
 * characters (soft hyphen, zero-width spaces and joiners, direction marks, word joiners): a
 * prompt of only such characters would be sent to the vendor and billed for a clip of nothing.
 * Spelled out, as `\p{Cf}` is not read alike by the document's readers (Python's `re` lacks it). */
const INVISIBLE_CLASS = '\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufff9-\\ufffb';
const SOMETHING_VISIBLE = new RegExp(`[^${WHITESPACE_CLASS}${INVISIBLE_CLASS}]`);
// The tag characters and variation selectors of plane 14 (U+E0000 to U+E03FF, all invisible)
// too, checked on the server only: in UTF-16 each is \udb40 and a low surrogate, and a pattern
// that names surrogates reads differently to the document's code-point readers. A text whose
// only visible character is above U+FFFF keeps that character's high half, so it passes.
const SOMETHING_VISIBLE_BEYOND_PLANE_14 = new RegExp(`[^${WHITESPACE_CLASS}${INVISIBLE_CLASS}\\udb40\\udc00-\\udfff]`);
const EMPTY_MESSAGE = 'must not be empty (only whitespace, control or invisible characters)';

/** Required text with something besides whitespace and control characters, at most `max`
 * characters, left as it came: for text the gateway passes on (an image prompt), which the
 * provider reads as the caller wrote it. */
export function visibleUntrimmedText(max: number) {
  return atMostCharacters(z.string({ error: requiredAs('a string') }), max, `is longer than ${max} characters`)
    .regex(SOMETHING_VISIBLE, EMPTY_MESSAGE)
    .refine((text) => SOMETHING_VISIBLE_BEYOND_PLANE_14.test(text), EMPTY_MESSAGE);
}

/** As visibleUntrimmedText, trimmed. */
export function visibleText(max: number) {
  return visibleUntrimmedText(max).trim();
}

// Control characters (C0, DEL, C1: a newline, a NUL) and the bidirectional overrides and
// isolates: in a name, the latter make "fg-prod\u202Eved" read "fg-proddev", so one key could
// pose as another in a list. Checked on the text as sent (before trimming), and written into the
// document as `not: {pattern}` with an unanchored class, which every engine that reads the
// document reads alike (an anchored `^…$` differs: Python's `$` matches before a final newline).
const NAME_REFUSED_CLASS = '[\\u0000-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]';
const NAME_REFUSED = new RegExp(NAME_REFUSED_CLASS.replaceAll('\\\\', '\\'));
export const NAME_CHARACTERS_MESSAGE = 'must not contain control characters (such as a line break), bidirectional overrides or unpaired surrogates (a \\ud800 escape without its partner)';

// Half of a UTF-16 pair with no other half (JSON lets `"\ud800x"` through): stored as UTF-8 it
// becomes U+FFFD, so the name kept would differ from the name answered. Not in the document's
// pattern: JSON Schema readers match code points, where such a half cannot occur.
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when `text` has none of the characters a name must not have. */
export function hasOnlyNameCharacters(text: string): boolean {
  return !NAME_REFUSED.test(text) && !UNPAIRED_SURROGATE.test(text);
}

/** A name a person reads in a list (an account's, a key's): visible text on one line, without
 * characters that change how the text around it reads. */
export function nameText(max: number) {
  return atMostCharacters(z.string({ error: requiredAs('a string') }), max, `is longer than ${max} characters`)
    .refine(hasOnlyNameCharacters, NAME_CHARACTERS_MESSAGE)
    .regex(NOT_ONLY_WHITESPACE, 'must not be empty')
    .trim()
    .meta({ not: { pattern: NAME_REFUSED_CLASS } });
}
