import type { FastifyRequest } from 'fastify';

// Result URLs point back at the simulator. Without a configured public URL they follow the
// Host the caller used, so a client that reached us via 127.0.0.1:<ephemeral port> (tests)
// or a compose service name both get a URL they can open.
export function publicBaseUrl(request: FastifyRequest, configured: string | undefined): string {
  if (configured) return configured.replace(/\/+$/, '');
  return `${request.protocol}://${request.host}`;
}
