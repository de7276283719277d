import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../../core/errors.ts';
import { bearerMatches } from '../../core/secret-match.ts';
import { soleAuthorization } from './authorization-header.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook for the admin API: bearer ADMIN_TOKEN, compared in constant time. */
    requireAdmin(request: FastifyRequest): Promise<void>;
  }
}

async function adminAuthPlugin(app: FastifyInstance, options: { adminToken: string | undefined }): Promise<void> {
  app.decorate('requireAdmin', async (request: FastifyRequest) => {
    if (!options.adminToken) {
      throw new GatewayError('service_unavailable', 'The admin API is disabled: set ADMIN_TOKEN for the api process.');
    }
    if (!bearerMatches(soleAuthorization(request), options.adminToken)) {
      throw new GatewayError('invalid_admin_token', 'Missing or invalid admin token (Authorization: Bearer <ADMIN_TOKEN>).', undefined, {
        'www-authenticate': 'Bearer',
      });
    }
  });
}

export const adminAuth = fp(adminAuthPlugin, { name: 'admin-auth' });
