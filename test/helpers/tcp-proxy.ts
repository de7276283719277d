import { connect, createServer, type Server, type Socket } from 'node:net';

// A loopback TCP proxy a test can cut, stall and restore, to take a dependency (the store) away
// from the code under test:
// - `cut()` goes the way a crashed server goes: it resets every open connection and stops
//   listening (new connections are refused);
// - `stall()` goes the way a hung one goes (SIGSTOP, a frozen VM): connections stay open and new
//   ones are accepted, but no byte is passed on either way;
// - `restore()` ends either, listening again on the same port and passing bytes again.

export interface TcpProxy {
  port: number;
  cut(): Promise<void>;
  stall(): void;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const pairs = new Set<[Socket, Socket]>();
  let server: Server | undefined;
  let port = 0;
  let stalled = false;

  // Bytes a stalled proxy does not read wait in the kernel's buffers, as they would for a
  // stopped server, and flow on in order when it is restored.
  const flow = ([client, upstream]: [Socket, Socket]) => {
    client.pipe(upstream).pipe(client);
    client.resume();
    upstream.resume();
  };
  const hold = ([client, upstream]: [Socket, Socket]) => {
    client.unpipe(upstream);
    upstream.unpipe(client);
    client.pause();
    upstream.pause();
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      if (server) return resolve(); // already listening
      server = createServer((client) => {
        const upstream = connect(target);
        const pair: [Socket, Socket] = [client, upstream];
        pairs.add(pair);
        for (const socket of pair) {
          sockets.add(socket);
          socket.on('close', () => {
            sockets.delete(socket);
            pairs.delete(pair);
          });
          socket.on('error', () => {
            client.destroy();
            upstream.destroy();
          });
        }
        if (stalled) hold(pair);
        else flow(pair);
      });
      server.once('error', (error) => {
        server = undefined;
        reject(error);
      });
      server.listen(port, '127.0.0.1', () => {
        const address = server!.address();
        port = typeof address === 'object' && address ? address.port : port;
        resolve();
      });
    });
  const cut = async () => {
    const closing = server ? new Promise<void>((resolve) => server!.close(() => resolve())) : Promise.resolve();
    server = undefined;
    for (const socket of sockets) socket.resetAndDestroy();
    await closing;
  };
  const stall = () => {
    if (stalled) return;
    stalled = true;
    for (const pair of pairs) hold(pair);
  };
  const restore = async () => {
    if (stalled) {
      stalled = false;
      for (const pair of pairs) flow(pair);
    }
    await listen();
  };

  await listen();
  return {
    get port() {
      return port;
    },
    cut,
    stall,
    restore,
    close: async () => {
      stalled = false;
      await cut();
    },
  };
}
