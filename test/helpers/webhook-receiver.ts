import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** A real HTTP receiver on loopback. `answers` are the statuses to reply with, in order; the
 * last one repeats. Each answer may carry extra headers (Retry-After, Location). `beforeAnswer`
 * runs before each answer, with the number of deliveries received so far. */
export async function startWebhookReceiver(answers: Array<number | { status: number; headers?: Record<string, string> }> = [200], beforeAnswer?: (received: number) => Promise<void>) {
  const received: ReceivedWebhook[] = [];
  const waiters: Array<() => void> = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const answer = answers[Math.min(received.length - 1, answers.length - 1)]!;
      let { status, headers } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
      // A hook that fails answers 500 (and says why) rather than leave the request hanging.
      await beforeAnswer?.(received.length).catch((error: unknown) => {
        console.error('webhook receiver: beforeAnswer failed:', error);
        [status, headers] = [500, {}];
      });
      response.writeHead(status, headers).end(status < 300 ? 'ok' : 'not ok');
      waiters.splice(0).forEach((wake) => wake());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks/video`,
    received,
    async waitFor(count: number, timeoutMs = 30_000): Promise<ReceivedWebhook[]> {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} webhook deliveries, got ${received.length}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
      return received;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
