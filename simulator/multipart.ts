import type { FastifyInstance, FastifyRequest } from 'fastify';

// OpenAI's video endpoint takes multipart/form-data (it carries an optional reference image).
// Node's own fetch implementation already parses multipart, so no extra dependency: text
// fields become strings, a file becomes a short description of what was uploaded.

export interface UploadedFile {
  filename: string;
  contentType: string;
  size: number;
}

export function acceptMultipartForms(scope: FastifyInstance): void {
  scope.addContentTypeParser<Buffer>('multipart/form-data', { parseAs: 'buffer' }, async (request: FastifyRequest, body: Buffer) => {
    let form: FormData;
    try {
      form = await new Response(body, { headers: { 'content-type': String(request.headers['content-type']) } }).formData();
    } catch {
      throw Object.assign(new Error('The multipart/form-data body could not be parsed.'), { statusCode: 400 });
    }
    const fields: Record<string, string | UploadedFile> = {};
    for (const [name, value] of form) {
      fields[name] = typeof value === 'string' ? value : { filename: value.name, contentType: value.type, size: value.size };
    }
    return fields;
  });
}
