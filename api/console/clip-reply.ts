import type { FastifyReply } from 'fastify';
import type { Clip } from '../services/task-clips.ts';

/** A finished task's clip from a console page's link: a redirect to its public address, or the
 * clip streamed through (services/task-clips.ts). */
export function sendClip(reply: FastifyReply, clip: Clip): FastifyReply {
  if ('redirectTo' in clip) return reply.redirect(clip.redirectTo, 302);
  // The clip, not a page: the console's no-store default is for pages holding secrets.
  return reply.type(clip.contentType).header('cache-control', 'private, max-age=3600').send(clip.body);
}
