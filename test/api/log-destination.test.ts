import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

// The api's batched stdout (api/log-destination.ts): a line logged while nothing else comes
// still shows up within the flush period, and lines still buffered when the process exits are
// written, not lost.

const destinationModule = fileURLToPath(new URL('../../api/log-destination.ts', import.meta.url));

const script = `
  import pino from 'pino';
  import { batchedStdout } from ${JSON.stringify(destinationModule)};
  const log = pino(batchedStdout());
  log.info('alone');
  process.stdin.once('data', () => {
    for (let i = 0; i < 3; i++) log.info('before exit ' + i);
    process.exit(0);
  });
`;

test('batched stdout: a lone line arrives within the flush period, and buffered lines survive process.exit', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => child.kill());
  let output = '';
  child.stdout.setEncoding('utf8');
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const lone = new Promise<void>((resolve) => {
    child.stdout.on('data', (text: string) => {
      output += text;
      if (output.includes('"alone"')) resolve();
    });
  });
  // Without the periodic flush the line would wait for 4 KiB of company, here for ever.
  await Promise.race([lone, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no line within 5 s: ${output}`)), 5_000))]);
  assert.equal(output.trim().split('\n').length, 1, 'only the lone line so far');

  child.stdin.write('go\n');
  assert.equal(await exited, 0);
  const messages = output.trim().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg);
  assert.deepEqual(messages, ['alone', 'before exit 0', 'before exit 1', 'before exit 2']);
});
