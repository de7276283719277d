import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { APIError, type OpenAI } from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { pythonStreamHelper } from '../helpers/python-stream-helper.ts';
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

  // [sim:break_after=N]: the provider drops the connection after N pieces of the answer, so a
  // caller's handling of a stream that fails midway can be tried against the local stack.
  it('the stream helper rejects with an APIError after the text delivered when the provider breaks off, and nothing is charged', async () => {
    const caller = await stack.newCaller('break-after');
    const stream = stack.client(caller.key).chat.completions.stream({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'one two three four five six [sim:break_after=3]' }] });
    let text = '';
    stream.on('content', (delta) => (text += delta));
    const error = await stream.finalChatCompletion().then(() => undefined, (caught: unknown) => caught);
    assert.ok(error instanceof APIError, `an APIError, not ${String(error)}`);
    assert.equal(error.code, 'upstream_error');
    assert.match(error.message, /mid-stream/);
    assert.equal(text.split(' ').filter(Boolean).length, 3, `three pieces delivered: ${JSON.stringify(text)}`);
    const account = await stack.settledAccount(caller.accountId);
    assert.equal(account.spent_micros, 0);
    assert.equal(account.held_micros, 0);
  });

  it('the Python stream helper raises openai.APIError when the provider breaks off', async () => {
    const caller = await stack.newCaller('break-after-python');
    const seen = await pythonStreamHelper(`${stack.baseUrl}/v1`, caller.key, 'a b c d [sim:break_after=2]');
    assert.equal(seen.raised, 'APIError');
    assert.equal(seen.code, 'upstream_error');
    assert.match(seen.message ?? '', /mid-stream/);
  });
});
