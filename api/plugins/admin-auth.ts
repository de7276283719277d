import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../../core/errors.ts';
import { soleAuthorization } from './authorization-header.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest hook for the admin API: bearer ADMIN_TOKEN, compared in constant time. */
    requireAdmin(request: FastifyRequest): Promise<void>;
  }
}

function digest(text: string): Buffer {
  // Hashing first gives both sides the same length, so timingSafeEqual never throws and the
  // comparison time does not depend on how long the guess was.
  return createHash('sha256').update(text).digest();
}

export function isAdminToken(candidate: string, adminToken: string): boolean {
  return timingSafeEqual(digest(candidate), digest(adminToken));
}

async function adminAuthPlugin(app: FastifyInstance, options: { adminToken: string | undefined }): Promise<void> {
  app.decorate('requireAdmin', async (request: FastifyRequest) => {
    if (!options.adminToken) {
      throw new GatewayError('service_unavailable', 'The admin API is disabled: set ADMIN_TOKEN for the api process.');
    }
    const token = /^Bearer\s+(\S+)\s*$/i.exec(soleAuthorization(request) ?? '')?.[1];
    if (!token || !isAdminToken(token, options.adminToken)) {
      throw new GatewayError('invalid_admin_token', 'Missing or invalid admin token (Authorization: Bearer <ADMIN_TOKEN>).', undefined, {
        'www-authenticate': 'Bearer',
      });
    }
  });
}

export const adminAuth = fp(adminAuthPlugin, { name: 'admin-auth' });
