import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { buildSimulator } from '../../simulator/app.ts';

// One simulator per test file on an ephemeral loopback port, driven by a clock the test moves
// by hand so video tasks advance without waiting.

export interface SimulatorHarness {
  url: string;
  /** Moves the injected clock forward. */
  advance(milliseconds: number): void;
  call(method: 'GET' | 'POST' | 'DELETE', path: string, options?: CallOptions): Promise<CallResult>;
  stats(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export interface CallOptions {
  json?: unknown;
  body?: string | Buffer | FormData;
  headers?: Record<string, string>;
  /** Omit the Authorization header. */
  anonymous?: boolean;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
  text: string;
  /** Parsed body; `any` because each test reads a different vendor's JSON. */
  json: any;
}

export const authorization = { authorization: 'Bearer sim-test-key' };

export async function startSimulator(): Promise<SimulatorHarness> {
  let now = Date.parse('2025-06-01T12:00:00Z');
  const app = buildSimulator({ clock: () => now });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  async function call(method: 'GET' | 'POST' | 'DELETE', path: string, options: CallOptions = {}): Promise<CallResult> {
    const headers: Record<string, string> = { ...(options.anonymous ? {} : authorization), ...options.headers };
    let body = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] = 'application/json';
    }
    if (body instanceof FormData) {
      // Let fetch's encoder write the multipart body and its boundary, as a client SDK would.
      const encoded = new Request('http://encoder.invalid', { method: 'POST', body });
      headers['content-type'] = encoded.headers.get('content-type')!;
      body = Buffer.from(await encoded.arrayBuffer());
    }
    const response = await request(`${url}${path}`, { method, headers, body });
    const bytes = Buffer.from(await response.body.arrayBuffer());
    const text = bytes.toString('utf8');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.statusCode, headers: response.headers, bytes, text, json };
  }

  return {
    url,
    advance(milliseconds) {
      now += milliseconds;
    },
    call,
    async stats() {
      return (await call('GET', '/_sim/stats', { anonymous: true })).json;
    },
    close: () => app.close(),
  };
}

/** The JSON payloads of an SSE body, and whether it ended with [DONE]. */
export function parseEvents(text: string) {
  const lines = text.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice('data: '.length));
  const done = lines.at(-1) === '[DONE]';
  return { done, chunks: lines.filter((line) => line !== '[DONE]').map((line) => JSON.parse(line)) };
}

/** True when `bytes` start like an MP4 file: a first box of type ftyp. */
export function looksLikeMp4(bytes: Buffer): boolean {
  return bytes.length > 8 && bytes.subarray(4, 8).toString('latin1') === 'ftyp';
}

export const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
