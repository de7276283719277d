import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import secureJson from 'secure-json-parse';
import { GatewayError } from '../../core/errors.ts';
import { mayHoldUnsafeIntegers, parseKeepingUnsafeIntegers } from '../../core/verbatim-integers.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The body is proxied: integers a number cannot hold are kept as written
     * (core/verbatim-integers.ts). */
    verbatimIntegers?: boolean;
  }
}

// JSON bodies are decoded strictly: invalid UTF-8 is a 400, not text silently patched with
// U+FFFD and passed on to a vendor. Parsing then refuses __proto__ and constructor.prototype
// keys, as Fastify's own parser does, and numbers past a double's range. A route that proxies its body keeps integers too large
// for a number as the caller wrote them (`config.verbatimIntegers`).

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Deeper than any request needs. JSON.parse takes thousands of levels, but what the routes do
 * with a body recurses (JSON.stringify of a proxied body, validation, Idempotency-Key's
 * canonical form) and would overflow the stack on some of them: a 500 for a bad request. */
const MAX_NESTING = 128;

/** Each level takes at least two characters (`[` and `]`), so a shorter body is shallow enough
 * without a look at it. */
const SHORTEST_TOO_DEEP = 2 * (MAX_NESTING + 1);

/** More values than any request needs (a conversation of thousands of messages, a hundred
 * tools with their schemas hold tens of thousands at most). Parsing is what costs: 20 MB of `{},`
 * (the chat route's body limit) took 3.4 s of the event loop and 470 MB of heap, for every
 * caller of the process. */
const MAX_VALUES = 100_000;

/**
 * What a look at JSON text's structure finds before it is parsed: more than `maxValues` values,
 * counted as the `{`, `[` and `,` outside strings (one per object, array and item after the
 * first), or nesting deeper than `maxDepth`. Not a validator: text that is no JSON is left to
 * the parser to refuse.
 *
 * A string without escapes (an image as a data URL, most of a large body) is jumped over with
 * indexOf, about 0.2 ms a megabyte; one with escapes is walked a character at a time, about
 * 6.5 ms a megabyte, where parsing it takes 2 to 5 (bodies over 100 KB only, so a chat call's
 * usual body is never walked). Jumping from escape to escape instead took 340 ms on 20 MB of
 * escaped quotes.
 */
export function structureBeyond(text: string, maxValues: number, maxDepth: number): 'values' | 'depth' | undefined {
  // A shorter text has fewer of those characters than the limit (and the parse is cheap).
  if (text.length <= maxValues) return undefined;
  let count = 0;
  let depth = 0;
  // The first backslash at or after the last place it was looked for from: searched again only
  // once passed, so every search starts where the last one ended (one pass over the text in all).
  let nextBackslash = -1;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === 0x22) {
      const quote = text.indexOf('"', index + 1);
      if (quote === -1) return undefined;
      if (nextBackslash !== text.length && nextBackslash <= index) {
        nextBackslash = text.indexOf('\\', index + 1);
        if (nextBackslash === -1) nextBackslash = text.length;
      }
      if (nextBackslash > quote) {
        index = quote;
        continue;
      }
      // Escapes before the quote: to the string's end a character at a time.
      index = nextBackslash;
      for (; index < text.length; index++) {
        const inside = text.charCodeAt(index);
        if (inside === 0x5c) index++;
        else if (inside === 0x22) break;
      }
      if (index >= text.length) return undefined;
    } else if (code === 0x7b || code === 0x5b) {
      if (++depth > maxDepth) return 'depth';
      if (++count > maxValues) return 'values';
    } else if (code === 0x7d || code === 0x5d) {
      depth--;
    } else if (code === 0x2c && ++count > maxValues) {
      return 'values';
    }
  }
  return undefined;
}

/** Whether `value` holds a number that is not finite: the walk every body takes, so it builds
 * no path (pathOfInfinity does, for the rare body that has one). */
function holdsInfinity(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (typeof value !== 'object' || value === null) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (holdsInfinity(item)) return true;
    return false;
  }
  for (const key in value) if (holdsInfinity((value as Record<string, unknown>)[key])) return true;
  return false;
}

/** Where in `value` a number is not finite (a literal like 1e400 parses as Infinity), as a
 * field path (`metadata.x`, `messages.0.n`); undefined when there is none. */
function pathOfInfinity(value: unknown, path: string): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : path;
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const found = pathOfInfinity(value[index], path ? `${path}.${index}` : String(index));
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const key in value) {
    const found = pathOfInfinity((value as Record<string, unknown>)[key], path ? `${path}.${key}` : key);
    if (found !== undefined) return found;
  }
  return undefined;
}

function nestedDeeperThan(value: unknown, levelsLeft: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (levelsLeft === 0) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (nestedDeeperThan(item, levelsLeft - 1)) return true;
    return false;
  }
  for (const key in value) if (nestedDeeperThan((value as Record<string, unknown>)[key], levelsLeft - 1)) return true;
  return false;
}

function tooDeep(): GatewayError {
  return new GatewayError('invalid_json', `The request body nests objects and arrays more than ${MAX_NESTING} levels deep.`);
}

/** The charset parameter of a Content-Type, lower-cased; undefined when there is none. */
function declaredCharset(contentType: string | undefined): string | undefined {
  if (contentType === undefined || !contentType.includes('=')) return undefined;
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType);
  return match?.[1]?.toLowerCase();
}

async function jsonBodyPlugin(app: FastifyInstance): Promise<void> {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
      // The bytes are compressed JSON, which is not read here: say so instead of "not UTF-8".
      return done(new GatewayError('unsupported_media_type', `Content-Encoding '${encoding.slice(0, 40)}' is not supported; send the JSON body uncompressed.`));
    }
    // Some clients label every request JSON: a route that takes no body (DELETE a key) does not
    // refuse one it never uses, empty or not. Asked only on the way to a refusal:
    // `request.routeOptions` builds an object at every read, on the chat path too.
    const takesNoBody = () => request.routeOptions.schema?.body === undefined;
    if (body.length === 0) return takesNoBody() ? done(null, undefined) : done(new GatewayError('empty_body', 'The request body is empty; send a JSON object.'));
    const charset = declaredCharset(request.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      if (takesNoBody()) return done(null, undefined);
      // JSON is UTF-8 (RFC 8259 8.1): a body said to be in another charset would be misread.
      return done(new GatewayError('unsupported_media_type', `JSON bodies are UTF-8; this one is labelled charset=${charset.slice(0, 40)}. Send it as UTF-8.`));
    }
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      return takesNoBody() ? done(null, undefined) : done(new GatewayError('invalid_json', 'The request body is not valid UTF-8.'));
    }
    const beyond = structureBeyond(text, MAX_VALUES, MAX_NESTING);
    if (beyond !== undefined) {
      if (takesNoBody()) return done(null, undefined);
      return done(beyond === 'depth' ? tooDeep() : new GatewayError('payload_too_large', `The request body holds more than ${MAX_VALUES} JSON values (objects, arrays and their items); send fewer.`));
    }
    let parsed: unknown;
    try {
      parsed = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
    } catch (error) {
      if (takesNoBody()) return done(null, undefined);
      const reason = error instanceof RangeError ? 'it is nested too deeply' : error instanceof Error ? error.message : 'parse error';
      return done(new GatewayError('invalid_json', `The request body is not valid JSON: ${reason}.`));
    }
    // A text long enough to have been looked at before the parse had its depth checked there.
    if (text.length >= SHORTEST_TOO_DEEP && text.length <= MAX_VALUES && nestedDeeperThan(parsed, MAX_NESTING)) return done(tooDeep());
    // Every JSON body here is an object: say so, rather than a schema's word about its first field.
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      const what = parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`;
      return done(new GatewayError('invalid_request', `The request body must be a JSON object, not ${what}.`));
    }
    // The route's config last: request.routeOptions builds an object on every read.
    if (mayHoldUnsafeIntegers(text) && request.routeOptions.config.verbatimIntegers) {
      // Parsed again only when the body has such an integer: the first parse vouched for it.
      parsed = parseKeepingUnsafeIntegers(text) ?? parsed;
    }
    // JSON cannot write Infinity: a proxied parameter would reach the upstream as null, and a
    // checked one would be refused for a reason the caller cannot see in what they sent. A walk
    // of the parsed value, linear in its size and blind to string contents: a test on the text
    // (a regex for 309 digits in a row, say) cost seconds on a body of long digit runs. After
    // the integers kept as written: an integer of 309 digits is one of those there.
    if (holdsInfinity(parsed)) {
      const named = (pathOfInfinity(parsed, '') ?? '').slice(0, 100);
      return done(new GatewayError('invalid_request', `Invalid field '${named}': the number is too large for a double (about 1.8e308 at most).`, named || undefined));
    }
    done(null, parsed);
  });
}

export const jsonBody = fp(jsonBodyPlugin, { name: 'json-body' });
