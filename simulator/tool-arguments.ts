// Builds arguments that satisfy a tool's JSON schema, so a simulated tool call is one the
// gateway's client could actually execute. Covers what function definitions use in practice
// (objects, required properties, enums, consts, scalar types, arrays with bounds, anyOf /
// oneOf / allOf, `$ref` into the schema's own `$defs` or `definitions`, where pydantic and zod
// put nested models and enums, `multipleOf`, and `pattern` through randexp). A recursive schema
// (a tree of nodes) gets a few levels, then the least its arrays and unions allow: no items, a
// null.

import randexp from 'randexp';

// randexp is CommonJS exporting the class itself, while its types declare it as `default`.
const RandExp = randexp as unknown as typeof randexp.default;

type Schema = Record<string, unknown>;

/** Deeper than this, arrays get only the items `minItems` asks for and unions their null. */
const SHALLOW_DEPTH = 8;
/** Deeper than this, the value is null whatever the schema (only a schema without any way out
 * of its recursion gets here). */
const MAX_DEPTH = 16;
/** A sample need not be huge, whatever `minItems` asks. */
const MAX_ITEMS = 100;

const isSchema = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);
const numberOr = (value: unknown, fallback: number) => (typeof value === 'number' && Number.isFinite(value) ? value : fallback);

function sampleString(schema: Schema): string {
  switch (schema.format) {
    case 'date-time':
      return '2025-01-01T00:00:00Z';
    case 'date':
      return '2025-01-01';
    case 'email':
      return 'someone@example.com';
    case 'uri':
    case 'url':
      return 'https://example.com/';
    case 'uuid':
      return '00000000-0000-4000-8000-000000000000';
  }
  const minimumLength = numberOr(schema.minLength, 0);
  const maximumLength = numberOr(schema.maxLength, Number.POSITIVE_INFINITY);
  const sample = 'sample'.padEnd(minimumLength, 'x').slice(0, maximumLength);
  return typeof schema.pattern === 'string' ? matching(schema.pattern, sample, minimumLength, maximumLength) : sample;
}

/** Compiles a schema's pattern: as the unicode expression JSON schema means, or, when that
 * refuses it (`\-` outside a class, which pydantic and zod patterns carry), as a plain one. */
function compiledPattern(pattern: string): RegExp | undefined {
  for (const flags of ['u', '']) {
    try {
      return new RegExp(pattern, flags);
    } catch {
      // Try the next reading.
    }
  }
  return undefined;
}

/** `sample` if the pattern finds it (JSON schema patterns are not anchored), else what randexp
 * makes for it: each choice its first and each repetition its fewest, then a few more, until
 * the string matches and fits the length bounds (the sample as a last resort). */
function matching(pattern: string, sample: string, minimumLength: number, maximumLength: number): string {
  const expression = compiledPattern(pattern);
  if (!expression || expression.test(sample)) return sample;
  const generator = new RandExp(expression);
  for (const extra of [0, 1, 2, 4, 8, 16, 32, 64]) {
    generator.randInt = (lowest: number, highest: number) => Math.min(highest, lowest + extra);
    const made = generator.gen();
    if (made.length >= minimumLength && made.length <= maximumLength && expression.test(made)) return made;
  }
  return sample;
}

function sampleNumber(schema: Schema, integer: boolean): number {
  const exclusiveMinimum = typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum : undefined;
  const lowest = exclusiveMinimum !== undefined ? exclusiveMinimum + (integer ? 1 : 0.5) : numberOr(schema.minimum, 1);
  const highest = numberOr(schema.maximum, numberOr(schema.exclusiveMaximum, Number.POSITIVE_INFINITY) - (integer ? 1 : 0.5));
  let value = Math.min(Math.max(1, lowest), highest);
  if (integer) value = Math.ceil(value);
  const step = typeof schema.multipleOf === 'number' && schema.multipleOf > 0 ? schema.multipleOf : undefined;
  if (step !== undefined) {
    // The first multiple at or above the value, or else the last below it, within the bounds.
    const above = Math.ceil(value / step) * step;
    const below = Math.floor(value / step) * step;
    if (above <= highest) value = above;
    else if (below >= lowest) value = below;
  }
  return value;
}

/** What a local `$ref` ("#/$defs/Unit") points at in `root`, with the keywords beside it; an
 * empty schema when it points nowhere (a remote reference, say). */
function resolveReference(schema: Schema, root: Schema): Schema {
  const { $ref: reference, ...beside } = schema;
  if (typeof reference !== 'string' || !reference.startsWith('#')) return beside;
  let target: unknown = root;
  for (const token of reference.slice(1).split('/').slice(1)) {
    const name = decodeURIComponent(token).replaceAll('~1', '/').replaceAll('~0', '~');
    target = isSchema(target) && Object.hasOwn(target, name) ? target[name] : undefined;
  }
  return isSchema(target) ? { ...target, ...beside } : beside;
}

function sampleArray(schema: Schema, depth: number, root: Schema): unknown[] {
  // One item shows the shape; more only when minItems asks; deep in a recursive schema, only those.
  const fewest = numberOr(schema.minItems, 0);
  const count = Math.min(Math.max(depth < SHALLOW_DEPTH ? 1 : 0, fewest), numberOr(schema.maxItems, Number.POSITIVE_INFINITY), MAX_ITEMS);
  return Array.from({ length: count }, () => sampleValue(isSchema(schema.items) ? schema.items : {}, depth + 1, root));
}

function sampleObject(schema: Schema, depth: number, root: Schema): Record<string, unknown> {
  const properties = isSchema(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required.filter((name): name is string => typeof name === 'string') : [];
  const result: Record<string, unknown> = {};
  for (const name of required) {
    const property = properties[name];
    result[name] = sampleValue(isSchema(property) ? property : {}, depth + 1, root);
  }
  return result;
}

// Every part of an allOf must hold at once: their properties and required lists add up.
function mergeAllOf(schema: Schema, root: Schema): Schema {
  const { allOf, ...outer } = schema;
  const parts = [outer, ...(Array.isArray(allOf) ? allOf.filter(isSchema).map((part) => ('$ref' in part ? resolveReference(part, root) : part)) : [])];
  return {
    ...Object.assign({}, ...parts),
    properties: Object.assign({}, ...parts.map((part) => (isSchema(part.properties) ? part.properties : {}))),
    required: parts.flatMap((part) => (Array.isArray(part.required) ? part.required : [])),
  };
}

/** A value valid against `schema`, built from its first-listed choices; references are
 * looked up in `root`, the whole schema. */
export function sampleValue(schema: Schema, depth = 0, root: Schema = schema): unknown {
  // Self-referencing schemas cannot recurse forever (a reference takes a level of its own).
  if (depth > MAX_DEPTH) return null;
  if ('$ref' in schema) return sampleValue(resolveReference(schema, root), depth + 1, root);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ('default' in schema) return schema.default;
  for (const combinator of ['anyOf', 'oneOf'] as const) {
    const options = schema[combinator];
    if (!Array.isArray(options)) continue;
    const choices = options.filter(isSchema);
    // Deep in a recursive schema, the null a union allows ends it.
    const chosen = (depth >= SHALLOW_DEPTH && choices.find((choice) => choice.type === 'null')) || choices[0];
    if (chosen) return sampleValue(chosen, depth + 1, root);
  }
  if (Array.isArray(schema.allOf)) return sampleValue(mergeAllOf(schema, root), depth + 1, root);
  // ["string", "null"] style unions: the first non-null type is the useful one.
  const declared = Array.isArray(schema.type) ? schema.type.find((type) => type !== 'null') ?? 'null' : schema.type;
  switch (declared) {
    case 'string':
      return sampleString(schema);
    case 'integer':
      return sampleNumber(schema, true);
    case 'number':
      return sampleNumber(schema, false);
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array':
      return sampleArray(schema, depth, root);
    case 'object':
      return sampleObject(schema, depth, root);
    default:
      return isSchema(schema.properties) ? sampleObject(schema, depth, root) : 'sample';
  }
}

/** Arguments for a function tool; a tool without parameters takes an empty object. */
export function sampleArguments(parameters: unknown): Record<string, unknown> {
  if (!isSchema(parameters)) return {};
  const value = sampleValue(parameters);
  return isSchema(value) ? value : {};
}
