import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { projectRoot } from '../../scripts/lib/engines.ts';
import { createKey } from '../helpers/app.ts';
import { startOpenAiStack, type SimulatorStack } from '../helpers/openai-stack.ts';

// Issue 4: the official `openai` Python package (pinned in scripts/requirements-tools.txt,
// installed into .tools/venv by scripts/provision.sh) against the gateway on a real port, with
// nothing changed but base_url and api_key. test/fixtures/openai_python_client.py makes every
// call and prints one JSON object; each of its fields is asserted here.

const python = path.join(projectRoot, '.tools/venv/bin/python');
const script = path.join(projectRoot, 'test/fixtures/openai_python_client.py');
const run = promisify(execFile);

interface ErrorSeen {
  class: string | null;
  module?: string;
  is_expected?: boolean;
  status: number | null;
  message: string;
  type?: string | null;
  retry_after?: string | null;
}

describe('the official openai Python client against the gateway', () => {
  let stack: SimulatorStack;
  let results: Record<string, any>;

  before(async () => {
    assert.ok(existsSync(python), `${python} is missing: run scripts/provision.sh`);
    stack = await startOpenAiStack('openai-python');
    const caller = await stack.newCaller('openai-python');
    const restricted = await createKey(stack.app, caller.accountId, { name: 'images only', models: ['gpt-image-1'] });
    // Async on purpose: the api answering the script runs in this very process.
    const { stdout, stderr } = await run(python, [script], {
      cwd: projectRoot,
      timeout: 120_000,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        FRAMEGATE_BASE_URL: `${stack.baseUrl}/v1`,
        FRAMEGATE_KEY: caller.key,
        FRAMEGATE_RESTRICTED_KEY: restricted.key,
      },
    }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`the Python client failed: ${error.message}\n${error.stderr ?? ''}\n${error.stdout ?? ''}`);
    });
    const lines = stdout.trim().split('\n');
    try {
      results = JSON.parse(lines.at(-1)!);
    } catch {
      throw new Error(`the Python client printed no JSON:\n${stdout}\n${stderr}`);
    }
  });
  after(() => stack?.close());

  it('runs the pinned 1.x/2.x client on the provisioned Python', () => {
    assert.match(results.openai_version, /^[12]\./);
    assert.match(results.python, /^3\./);
  });

  it('lists the models', () => {
    assert.ok(results.model_ids.includes('gpt-4o-mini'));
    assert.ok(results.model_ids.includes('gpt-image-1'));
  });

  it('answers a chat completion', () => {
    const completion = results.completion;
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.model, 'gpt-4o-mini');
    assert.match(completion.id, /^chatcmpl-/);
    assert.equal(completion.role, 'assistant');
    assert.match(completion.content, /Say hello to the gateway/);
    assert.equal(completion.finish_reason, 'stop');
    assert.ok(completion.usage.prompt_tokens > 0 && completion.usage.completion_tokens > 0);
    assert.equal(completion.usage.total_tokens, completion.usage.prompt_tokens + completion.usage.completion_tokens);
  });

  it('streams deltas that add up to the non-streamed answer', () => {
    const stream = results.stream;
    assert.ok(stream.chunks >= 3, `only ${stream.chunks} chunks`);
    assert.ok(stream.text.length > 0);
    assert.equal(stream.text, stream.whole);
    assert.deepEqual(stream.objects, ['chat.completion.chunk']);
    assert.equal(stream.ids, 1);
    assert.deepEqual(stream.models, ['gpt-4o-mini']);
    assert.equal(stream.last_finish_reason, 'stop');
  });

  it('round-trips a tool call and its result', () => {
    const tools = results.tools;
    assert.equal(tools.first_finish_reason, 'tool_calls');
    assert.equal(tools.call_type, 'function');
    assert.match(tools.call_id, /^call_/);
    assert.equal(tools.function, 'get_weather');
    assert.equal(typeof tools.arguments.city, 'string');
    assert.ok(['celsius', 'fahrenheit'].includes(tools.arguments.unit));
    assert.equal(tools.second_finish_reason, 'stop');
    assert.match(tools.second_content, /21/);
  });

  it('parses a structured output into the pydantic model it asked for, nested models and enums included', () => {
    const landmark = { name: 'sample', year_built: 1 };
    assert.deepEqual(results.structured, {
      parsed_type: 'City',
      parsed: { name: 'sample', population: 1, coastal: true, climate: 'temperate', oldest: landmark, landmarks: [landmark] },
      refusal: null,
    });
  });

  it('generates a gpt-image-1 image as base64 without response_format, as OpenAI does, that decodes to a PNG', () => {
    assert.equal(results.image.count, 1);
    assert.equal(results.image.png_signature, true);
    assert.ok(results.image.bytes > 8);
  });

  const refusals: Array<[string, string, number, RegExp | undefined]> = [
    ['bad_key', 'AuthenticationError', 401, undefined],
    ['restricted_key', 'PermissionDeniedError', 403, undefined],
    ['unknown_model', 'NotFoundError', 404, /gpt-5-imaginary/],
    ['temperature_3', 'BadRequestError', 400, /temperature/],
    ['rate_limited', 'RateLimitError', 429, undefined],
  ];
  for (const [field, className, status, message] of refusals) {
    it(`raises the client's own ${className} (${field})`, () => {
      const seen = results.errors[field] as ErrorSeen;
      assert.equal(seen.class, className, `saw ${JSON.stringify(seen)}`);
      assert.equal(seen.is_expected, true);
      assert.match(seen.module ?? '', /^openai\b/);
      assert.equal(seen.status, status);
      if (message) assert.match(seen.message, message);
    });
  }

  it('keeps the upstream 429 details for the Python client', () => {
    const seen = results.errors.rate_limited as ErrorSeen;
    assert.equal(seen.retry_after, '1');
    assert.equal(seen.type, 'rate_limit_error');
  });
});
