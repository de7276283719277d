import type { FastifyRequest } from 'fastify';
import { GatewayError } from '../../core/errors.ts';

// Node keeps the first of several Authorization headers and drops the rest. A proxy in front
// that reads the last would then see another identity than the gateway does, so a request
// with more than one is refused, not judged by whichever comes first.

/** The request's one Authorization header (undefined when there is none); throws a 400 when it
 * sent several. */
export function soleAuthorization(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const raw = request.raw.rawHeaders;
  let seen = 0;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization' && ++seen > 1) {
      throw new GatewayError('invalid_request', 'The request carries several Authorization headers; send exactly one.');
    }
  }
  return header;
}
