import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clip } from './services/task-clips.ts';
import type { ClipRequest } from '../vendors/types.ts';

// A finished task's clip as an HTTP answer, for the API's content route and the console's clip
// links alike: a redirect to its public address, or the clip streamed through with the
// vendor's length and range headers, so players can seek and downloads can resume.

/** What the caller asked of the clip: a part of it (Range), or only its headers (HEAD). */
export function clipRequestOf(request: FastifyRequest): ClipRequest {
  const { range, 'if-range': ifRange } = request.headers;
  // One range only: several would come back as multipart/byteranges, which is no mp4 (and what
  // players send is one). Without it the vendor answers the whole clip, as HTTP allows.
  const single = range !== undefined && !range.includes(',');
  return {
    ...(request.method === 'HEAD' ? { headOnly: true } : {}),
    ...(single ? { range } : {}),
    ...(single && typeof ifRange === 'string' ? { ifRange } : {}),
  };
}

/** The console's clip links: the clip, not a page, so not the no-store its pages holding
 * secrets get; private, as it came through a session. */
export const CONSOLE_CLIP_CACHING = { 'cache-control': 'private, max-age=3600' };

export function sendClip(reply: FastifyReply, clip: Clip, headers: Record<string, string> = {}): FastifyReply {
  if ('redirectTo' in clip) return reply.redirect(clip.redirectTo, 302);
  reply.code(clip.status).type(clip.contentType).headers(headers);
  if (clip.contentLength !== undefined) reply.header('content-length', clip.contentLength);
  if (clip.contentRange !== undefined) reply.header('content-range', clip.contentRange);
  if (clip.acceptRanges !== undefined) reply.header('accept-ranges', clip.acceptRanges);
  // The validators a resumed download sends back in If-Range.
  if (clip.etag !== undefined) reply.header('etag', clip.etag);
  if (clip.lastModified !== undefined) reply.header('last-modified', clip.lastModified);
  // A stream, which Fastify pipes as is (for HEAD, it drains the empty body).
  return reply.send(clip.body);
}
