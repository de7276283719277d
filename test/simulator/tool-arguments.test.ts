import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sampleArguments } from '../../simulator/tool-arguments.ts';

describe('simulator: tool arguments built from a JSON schema', () => {
  it('fills required properties with values their schemas accept, and leaves optional ones out', () => {
    const args = sampleArguments({
      type: 'object',
      properties: {
        query: { type: 'string', minLength: 10 },
        limit: { type: 'integer', minimum: 5, maximum: 50 },
        ratio: { type: 'number', exclusiveMinimum: 0, maximum: 0.5 },
        sort: { type: 'string', enum: ['relevance', 'date'] },
        tags: { type: 'array', items: { type: 'string', format: 'email' }, minItems: 2 },
        filters: { type: 'object', properties: { since: { type: 'string', format: 'date' } }, required: ['since'] },
        nickname: { type: ['string', 'null'] },
        fixed: { const: 'v1' },
        flag: { type: 'boolean' },
        optional: { type: 'string' },
      },
      required: ['query', 'limit', 'ratio', 'sort', 'tags', 'filters', 'nickname', 'fixed', 'flag'],
    });
    assert.deepEqual(args, {
      query: 'samplexxxx',
      limit: 5,
      ratio: 0.5,
      sort: 'relevance',
      tags: ['someone@example.com', 'someone@example.com'],
      filters: { since: '2025-01-01' },
      nickname: 'sample',
      fixed: 'v1',
      flag: true,
    });
  });

  it('follows anyOf and allOf, and gives an empty object when there are no parameters', () => {
    assert.deepEqual(sampleArguments({ anyOf: [{ type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] }, { type: 'null' }] }), { id: 1 });
    assert.deepEqual(
      sampleArguments({ allOf: [{ properties: { a: { type: 'string' } }, required: ['a'] }, { properties: { b: { type: 'boolean' } }, required: ['b'] }] }),
      { a: 'sample', b: true },
    );
    assert.deepEqual(sampleArguments(undefined), {});
    assert.deepEqual(sampleArguments({ type: 'object', properties: {} }), {});
  });
  it('follows $ref into the schema\'s $defs or definitions, as pydantic and zod write nested models and enums', () => {
    // What pydantic makes of: class Unit(str, Enum); class Place(BaseModel): name, unit;
    // class Trip(BaseModel): start: Place; stops: list[Place]; note: Optional[str] = None.
    const trip = {
      $defs: {
        Place: { properties: { name: { title: 'Name', type: 'string' }, unit: { $ref: '#/$defs/Unit' } }, required: ['name', 'unit'], title: 'Place', type: 'object', additionalProperties: false },
        Unit: { enum: ['celsius', 'fahrenheit'], title: 'Unit', type: 'string' },
      },
      properties: {
        start: { $ref: '#/$defs/Place', description: 'where it begins' },
        stops: { items: { $ref: '#/$defs/Place' }, title: 'Stops', type: 'array' },
        note: { anyOf: [{ type: 'string' }, { type: 'null' }], default: null },
      },
      required: ['start', 'stops', 'note'],
      type: 'object',
    };
    const place = { name: 'sample', unit: 'celsius' };
    assert.deepEqual(sampleArguments(trip), { start: place, stops: [place], note: null });
    // Older drafts' definitions, an allOf around a reference, and a pointer's escapes (~1 is '/').
    assert.deepEqual(
      sampleArguments({
        definitions: { 'a/b': { type: 'object', properties: { n: { type: 'integer', minimum: 3 } }, required: ['n'] } },
        type: 'object',
        properties: { wrapped: { allOf: [{ $ref: '#/definitions/a~1b' }] }, direct: { $ref: '#/definitions/a~1b' } },
        required: ['wrapped', 'direct'],
      }),
      { wrapped: { n: 3 }, direct: { n: 3 } },
    );
    // A reference that points nowhere, or outside the schema, leaves the old guess; one that
    // points at itself ends in null instead of recursing forever.
    assert.deepEqual(sampleArguments({ type: 'object', properties: { x: { $ref: 'https://example.com/x.json' }, y: { $ref: '#/$defs/Missing' } }, required: ['x', 'y'] }), { x: 'sample', y: 'sample' });
    let nested: unknown = sampleArguments({ type: 'object', properties: { self: { $ref: '#' } }, required: ['self'] });
    let levels = 0;
    for (; typeof nested === 'object' && nested !== null; levels++) nested = (nested as { self: unknown }).self;
    assert.equal(nested, null);
    assert.ok(levels >= 3 && levels <= 16, `${levels} levels`);
  });
  it('meets pattern, multipleOf and minItems, and ends a recursive schema in an empty array or a null', () => {
    const args = sampleArguments({
      type: 'object',
      properties: {
        code: { type: 'string', pattern: '^[A-Z]{3}$' },
        escaped: { type: 'string', pattern: '^\\d{3}\\-\\d{4}$' },
        digits: { type: 'string', pattern: '^\\d+$', minLength: 3 },
        tens: { type: 'integer', minimum: 0, maximum: 5, multipleOf: 10 },
        found: { type: 'string', pattern: 'amp' },
        broken: { type: 'string', pattern: '([' },
        step: { type: 'number', multipleOf: 5, minimum: 3 },
        cents: { type: 'integer', multipleOf: 25, exclusiveMinimum: 100, maximum: 200 },
        many: { type: 'array', items: { type: 'integer' }, minItems: 20 },
        tree: { $ref: '#/$defs/Node' },
        list: { $ref: '#/$defs/Link' },
      },
      required: ['code', 'escaped', 'digits', 'tens', 'found', 'broken', 'step', 'cents', 'many', 'tree', 'list'],
      $defs: {
        Node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/Node' } } }, required: ['name', 'children'] },
        Link: { type: 'object', properties: { next: { anyOf: [{ $ref: '#/$defs/Link' }, { type: 'null' }] } }, required: ['next'] },
      },
    }) as Record<string, unknown>;
    assert.equal(args.code, 'AAA', 'the shortest string the pattern matches');
    assert.equal(args.found, 'sample', 'a pattern that finds the sample keeps it');
    assert.equal(args.broken, 'sample', 'a pattern that is no regular expression is ignored');
    assert.equal(args.step, 5);
    assert.equal(args.escaped, '000-0000', 'an escape only a non-unicode expression takes (\\- outside a class)');
    assert.equal(args.digits, '222', 'long enough for minLength');
    assert.equal(args.tens, 0, 'the multiple below when the one above passes the maximum');
    assert.equal(args.cents, 125);
    assert.equal((args.many as unknown[]).length, 20);
    // Some levels, then an empty array / a null: every level is a valid node.
    const depthOf = (value: unknown, field: string): number => {
      let levels = 0;
      for (let at = value as Record<string, unknown> | null; at; levels++) {
        const next = at[field];
        at = Array.isArray(next) ? (next[0] as Record<string, unknown> | undefined) ?? null : (next as Record<string, unknown> | null);
      }
      return levels;
    };
    assert.ok(depthOf(args.tree, 'children') >= 2, 'the tree has children');
    assert.ok(JSON.stringify(args.tree).includes('"children":[]'), 'and ends in an empty array, not a null');
    assert.ok(!JSON.stringify(args.tree).includes('null'));
    assert.ok(depthOf(args.list, 'next') >= 2);
  });
});
