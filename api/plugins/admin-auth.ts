import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../../core/errors.ts';
import { bearerMatches } from '../../core/secret-match.ts';
import { soleAuthorization } from './authorization-header.ts';
import { FailuresByAddress, OPERATOR_TOKEN_GUESSES, tooManyWrongTokens } from '../../core/failures-by-address.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook for the admin API: bearer ADMIN_TOKEN, compared in constant time. */
    requireAdmin(request: FastifyRequest): Promise<void>;
  }
}

export interface AdminAuthOptions {
  adminToken: string | undefined;
  /** Wrong tokens per address; tests bring one on a clock of their own. */
  wrongTokens?: FailuresByAddress;
}

async function adminAuthPlugin(app: FastifyInstance, options: AdminAuthOptions): Promise<void> {
  const wrongTokens = options.wrongTokens ?? new FailuresByAddress(OPERATOR_TOKEN_GUESSES);
  app.decorate('requireAdmin', async (request: FastifyRequest) => {
    if (!options.adminToken) {
      throw new GatewayError('service_unavailable', 'The admin API is disabled: set ADMIN_TOKEN for the api process.');
    }
    const authorization = soleAuthorization(request);
    // No token guesses nothing: a probe or a browser, never counted, so it cannot lock the
    // operator out (everyone behind a proxy the api does not trust shares one address).
    if (authorization === undefined) throw invalidAdminToken();
    // Asked before the token is compared: past its guesses, an address learns nothing more.
    const waitSeconds = wrongTokens.admit(request.ip);
    if (waitSeconds > 0) throw tooManyWrongTokens('admin', waitSeconds);
    if (!bearerMatches(authorization, options.adminToken)) throw invalidAdminToken();
    wrongTokens.forgive(request.ip);
  });
}

function invalidAdminToken(): GatewayError {
  return new GatewayError('invalid_admin_token', 'Missing or invalid admin token (Authorization: Bearer <ADMIN_TOKEN>).', undefined, { 'www-authenticate': 'Bearer' });
}

export const adminAuth = fp(adminAuthPlugin, { name: 'admin-auth' });
