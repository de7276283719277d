import type { FastifyRequest } from 'fastify';

// The simulator accepts any key: what it checks is that the gateway sends one at all, in the
// form the vendors require, so a forgotten header fails here as it would upstream.
export function hasBearerToken(request: FastifyRequest): boolean {
  const header = request.headers.authorization;
  return typeof header === 'string' && /^Bearer\s+\S/i.test(header);
}
