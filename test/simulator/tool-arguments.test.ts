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
});
