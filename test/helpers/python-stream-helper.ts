import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../scripts/lib/engines.ts';

/** What the official Python client's stream helper made of one streamed chat call. */
export interface PythonStreamOutcome {
  /** The exception's class name, or null when the stream ended without one. */
  raised: string | null;
  code?: string;
  type?: string;
  message?: string;
  /** The content deltas it delivered before it ended. */
  text: string;
}

/** Runs `client.chat.completions.stream` of the project's Python `openai` (in .tools/venv)
 * against `baseUrl` (with `/v1`), with `content` as the user message and the client's retries
 * off, reading every event. */
export async function pythonStreamHelper(baseUrl: string, key: string, content: string): Promise<PythonStreamOutcome> {
  const code = [
    'import json, openai, sys',
    'c = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)',
    'text = ""',
    'try:',
    '    with c.chat.completions.stream(model="gpt-4o-mini", messages=[{"role": "user", "content": sys.argv[3]}]) as s:',
    '        for e in s:',
    '            if e.type == "content.delta": text += e.delta',
    '    print(json.dumps({"raised": None, "text": text}))',
    'except openai.APIError as e:',
    '    print(json.dumps({"raised": type(e).__name__, "code": e.code, "type": e.type, "message": e.message, "text": text}))',
  ].join('\n');
  const { stdout } = await promisify(execFile)(path.join(projectRoot, '.tools/venv/bin/python'), ['-c', code, baseUrl, key, content], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as PythonStreamOutcome;
}
