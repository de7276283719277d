import Fastify from 'fastify';
import { Pool } from 'undici';

// The floor of the chat proxy's stack, for bench/chat-proxy.ts: Fastify parsing the JSON body
// and undici forwarding it to the upstream, streaming the answer back. No authentication,
// validation, billing, limits or logging: what Framegate adds above this line is its own cost,
// what this adds above the direct call is the cost of Node, Fastify and undici.
// Run as its own process: `UPSTREAM_URL=… PORT=… node --import tsx bench/lib/bare-proxy.ts`.

const upstream = new Pool(process.env.UPSTREAM_URL!, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
const app = Fastify({ logger: false });

app.post('/v1/chat/completions', async (request, reply) => {
  const response = await upstream.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(request.body),
  });
  reply.status(response.statusCode).header('content-type', String(response.headers['content-type'] ?? 'application/json'));
  return reply.send(response.body);
});

const address = await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT || 0) });
process.stdout.write(`READY ${new URL(address).port}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
