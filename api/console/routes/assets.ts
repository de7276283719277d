import type { FastifyInstance } from 'fastify';
import { CONSOLE_SCRIPT } from '../assets/script.ts';
import { CONSOLE_STYLESHEET } from '../assets/stylesheet.ts';

// The stylesheet and the script are separate files (not inline) so the console's Content
// Security Policy can forbid inline code altogether.

export async function assetRoutes(app: FastifyInstance): Promise<void> {
  const serve = (path: string, type: string, body: string) =>
    app.get(path, async (_request, reply) => reply.type(type).header('cache-control', 'public, max-age=300').send(body));
  serve('/assets/console.css', 'text/css; charset=utf-8', CONSOLE_STYLESHEET);
  serve('/assets/console.js', 'text/javascript; charset=utf-8', CONSOLE_SCRIPT);
}
