import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// A real HTTP server on loopback that plays recorded vendor answers and keeps every request it
// received, so tests can assert the exact wire traffic an adapter produces.

const fixturesDirectory = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/vendors');

/** The text of a recorded vendor response, e.g. fixture('seedance', 'task-queued'). */
export function fixture(vendor: 'seedance' | 'openai-videos', name: string): string {
  return readFileSync(path.join(fixturesDirectory, vendor, `${name}.json`), 'utf8');
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface CannedAnswer {
  status: number;
  headers?: Record<string, string>;
  /** A string or bytes; bytes are written in several chunks, like a real download. */
  body?: string | Buffer;
  /** Never answer, to exercise timeouts. */
  hang?: boolean;
}

export interface RecordingServer {
  baseUrl: string;
  requests: RecordedRequest[];
  /** Sets the answer to `METHOD /path` (path with its query, as the client sent it). */
  answer(method: string, requestPath: string, answer: CannedAnswer): void;
  close(): Promise<void>;
}

export async function startRecordingServer(): Promise<RecordingServer> {
  const requests: RecordedRequest[] = [];
  const answers = new Map<string, CannedAnswer>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const method = request.method ?? '';
      const requestPath = request.url ?? '';
      requests.push({ method, path: requestPath, headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      const answer = answers.get(`${method} ${requestPath}`);
      if (!answer) {
        // Loud on purpose: a test that forgot a route fails with the path it did not expect.
        response.writeHead(599, { 'content-type': 'text/plain' }).end(`no recorded answer for ${method} ${requestPath}`);
        return;
      }
      if (answer.hang) return;
      const body = answer.body ?? '';
      const contentType = typeof body === 'string' ? 'application/json' : 'application/octet-stream';
      response.writeHead(answer.status, { 'content-type': contentType, ...answer.headers });
      if (typeof body === 'string') {
        response.end(body);
        return;
      }
      const pieceSize = Math.max(1, Math.ceil(body.length / 4));
      for (let offset = 0; offset < body.length; offset += pieceSize) response.write(body.subarray(offset, offset + pieceSize));
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    answer(method, requestPath, answer) {
      answers.set(`${method} ${requestPath}`, answer);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback address where nothing listens: bound once to get a free port, then released. */
export async function refusedBaseUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
