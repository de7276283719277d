import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { request } from 'undici';
import { authorization } from './simulator-harness.ts';

const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

describe('simulator: server process', () => {
  it('listens where told, logs its URL, uses SIMULATOR_PUBLIC_URL in results and exits cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'simulator/server.ts'], {
      cwd: projectRoot,
      env: { ...process.env, SIMULATOR_PORT: '0', SIMULATOR_HOST: '127.0.0.1', SIMULATOR_PUBLIC_URL: 'http://simulator.internal:8090/' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit');
    try {
      let output = '';
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no listening line within 15 s:\n${output}`)), 15_000);
        child.stdout.setEncoding('utf8').on('data', (text: string) => {
          output += text;
          const match = /vendor simulator listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(match[1]!);
          }
        });
        child.once('exit', (code) => reject(new Error(`exited early with ${code}:\n${output}`)));
      });

      const created = await request(`${url}/api/v3/contents/generations/tasks`, {
        method: 'POST',
        headers: { ...authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', content: [{ type: 'text', text: 'instant [sim:delay=0]' }] }),
      });
      const { id } = (await created.body.json()) as { id: string };
      const task = (await (await request(`${url}/api/v3/contents/generations/tasks/${id}`, { headers: authorization })).body.json()) as {
        content: { video_url: string };
      };
      assert.equal(task.content.video_url, `http://simulator.internal:8090/media/${id}.mp4`);
    } finally {
      child.kill('SIGTERM');
    }
    const [code, signal] = await exited;
    assert.deepEqual([code, signal], [0, null], 'exits by itself with code 0');
  });
});
