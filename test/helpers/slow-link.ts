import { connect, createServer, type Socket } from 'node:net';

// A loopback TCP link that hands every chunk on `latencyMs` after it arrived, both ways and in
// order: a store across a busy network, or a busy store, for code whose fairness depends on
// how long its store round trips take.

export interface SlowLink {
  port: number;
  close(): Promise<void>;
}

export async function startSlowLink(target: { host: string; port: number }, latencyMs: number): Promise<SlowLink> {
  const sockets = new Set<Socket>();
  const forward = (from: Socket, to: Socket) => {
    from.on('data', (chunk) => {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, latencyMs);
    });
  };
  const server = createServer((client) => {
    const upstream = connect(target);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
      socket.on('error', () => socket.destroy());
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
