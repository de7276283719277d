import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ImageStore } from './image-store.ts';

// Result media the vendors would host on a CDN. Every finished video task serves the same
// tiny real clip (1 s, 64x36, H.264, made once with ffmpeg and committed) so downloads,
// content types and players behave as with real output. No auth, like a presigned URL.

export const sampleClip = readFileSync(new URL('./assets/sample.mp4', import.meta.url));

type ByteRange = { start: number; end: number } | 'unsatisfiable' | undefined;

// One `bytes=` range is what players and download resumers send; anything fancier (several
// ranges) is answered with the whole body, which RFC 9110 allows.
function parseRange(header: string | undefined, size: number): ByteRange {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const [, first = '', last = ''] = match;
  if (first === '') {
    const suffix = Number(last);
    return suffix === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  return start >= size || start > end ? 'unsatisfiable' : { start, end };
}

/** A strong entity tag of the bytes, as a CDN sends one. */
function entityTag(bytes: Buffer): string {
  return `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`;
}

/** Replies with `bytes`, honouring a single Range request. Its If-Range must name these bytes'
 * entity tag (a date never matches: no Last-Modified is sent), else the whole body comes, as
 * RFC 9110 says: a download resumed against other bytes must start over. */
export function sendMediaBytes(request: FastifyRequest, reply: FastifyReply, bytes: Buffer, contentType: string): FastifyReply {
  const etag = entityTag(bytes);
  reply.header('accept-ranges', 'bytes').header('content-type', contentType).header('etag', etag);
  const ifRange = request.headers['if-range'] as string | undefined;
  const range = ifRange === undefined || ifRange.trim() === etag ? parseRange(request.headers.range, bytes.length) : undefined;
  if (range === 'unsatisfiable') {
    return reply.code(416).header('content-range', `bytes */${bytes.length}`).send();
  }
  if (range === undefined) return reply.code(200).send(bytes);
  return reply
    .code(206)
    .header('content-range', `bytes ${range.start}-${range.end}/${bytes.length}`)
    .send(bytes.subarray(range.start, range.end + 1));
}

export interface MediaOptions {
  /** True when the video task with this id finished successfully. */
  hasFinishedClip(taskId: string): boolean;
  images: ImageStore;
}

export async function mediaRoutes(app: FastifyInstance, options: MediaOptions): Promise<void> {
  app.get<{ Params: { file: string } }>('/media/:file', async (request, reply) => {
    const match = /^(.+)\.(mp4|png)$/.exec(request.params.file);
    const [, id = '', extension] = match ?? [];
    if (extension === 'mp4' && options.hasFinishedClip(id)) {
      return sendMediaBytes(request, reply, sampleClip, 'video/mp4');
    }
    const image = extension === 'png' ? options.images.find(id) : undefined;
    if (image) return sendMediaBytes(request, reply, image, 'image/png');
    return reply.code(404).send({ error: { message: `No media named ${request.params.file}.`, code: 'not_found' } });
  });
}
