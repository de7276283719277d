import { createServer } from 'node:http';
import { Pool } from 'undici';

// The floor below the floor, for bench/chat-proxy.ts: node:http and undici forwarding the body,
// without Fastify. It answers one question: how much of the added latency is Node's own (an
// extra loopback hop, two HTTP parses and two event-loop turns on this machine), whatever
// framework runs on top. Same upstream pool settings as bare-proxy.ts.
// Run as its own process: `UPSTREAM_URL=… PORT=… node --import tsx bench/lib/bare-node-proxy.ts`.

const upstream = new Pool(process.env.UPSTREAM_URL!, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });

const server = createServer((request, response) => {
  const parts: Buffer[] = [];
  request.on('data', (part: Buffer) => parts.push(part));
  request.on('end', () => {
    upstream
      .request({ method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body: Buffer.concat(parts) })
      .then(({ statusCode, headers, body }) => {
        response.writeHead(statusCode, { 'content-type': String(headers['content-type'] ?? 'application/json') });
        body.pipe(response);
      })
      .catch((error: Error) => {
        response.writeHead(502, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: error.message } }));
      });
  });
});

server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`READY ${typeof address === 'object' && address ? address.port : ''}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
