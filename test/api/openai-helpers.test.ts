import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// The openai client's own helpers, which validate what comes back against the caller's zod
// schema, through the gateway to the simulator: code written for OpenAI's structured outputs
// and tool loops must run locally as it does there.

interface Section {
  title: string;
  sections: Section[];
}

const section: z.ZodType<Section> = z.object({
  title: z.string(),
  get sections() {
    return z.array(section);
  },
});

const outline = z.object({
  code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
  rating: z.number().int().multipleOf(5).min(3).max(100),
  tags: z.array(z.string()).min(12),
  tone: z.enum(['formal', 'casual']),
  summary: z.string().nullable(),
  root: section,
});

describe('the openai client helpers (parse, runTools) through the gateway', () => {
  let stack: SimulatorStack;
  let client: OpenAI;

  before(async () => {
    stack = await startOpenAiStack('openai-helpers');
    client = stack.client((await stack.newCaller('helpers')).key);
  });
  after(() => stack.close());

  it('parse() fills a zod schema with a pattern, a multiple, a minimum of items, an enum and recursion', async () => {
    const completion = await client.chat.completions.parse({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Outline a report' }],
      response_format: zodResponseFormat(outline, 'outline'),
    });
    const parsed = completion.choices[0]!.message.parsed;
    assert.ok(parsed, 'parsed into the schema');
    assert.match(parsed.code, /^[A-Z]{3}-\d{2}$/);
    assert.equal(parsed.rating % 5, 0);
    assert.ok(parsed.tags.length >= 12);
    assert.ok(parsed.root.sections.length > 0, 'the tree has a level below its root');
  });

  it('runTools() calls a zod-typed tool with arguments its schema accepts, then ends on the text answer', async () => {
    const calls: unknown[] = [];
    const runner = client.chat.completions.runTools({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'File this report' }],
      tools: [
        zodFunction({
          name: 'file_report',
          parameters: z.object({ outline: section, priority: z.number().int().multipleOf(10).min(1) }),
          function: (args) => {
            calls.push(args);
            return 'filed as R-7';
          },
        }),
      ],
    });
    const answer = await runner.finalContent();
    assert.equal(calls.length, 1, 'the tool ran once, with arguments that passed its schema');
    assert.equal((calls[0] as { priority: number }).priority % 10, 0);
    assert.match(answer ?? '', /filed as R-7/);
  });
});
