import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import secureJson from 'secure-json-parse';
import { GatewayError } from '../../core/errors.ts';

// JSON bodies are decoded strictly: invalid UTF-8 is a 400, not text silently patched with
// U+FFFD and passed on to a vendor. Parsing then refuses __proto__ and constructor.prototype
// keys, as Fastify's own parser does.

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

async function jsonBodyPlugin(app: FastifyInstance): Promise<void> {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body: Buffer, done) => {
    if (body.length === 0) return done(new GatewayError('empty_body', 'The request body is empty; send a JSON object.'));
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      return done(new GatewayError('invalid_json', 'The request body is not valid UTF-8.'));
    }
    try {
      done(null, secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));
    } catch (error) {
      const reason = error instanceof RangeError ? 'it is nested too deeply' : error instanceof Error ? error.message : 'parse error';
      done(new GatewayError('invalid_json', `The request body is not valid JSON: ${reason}.`));
    }
  });
}

export const jsonBody = fp(jsonBodyPlugin, { name: 'json-body' });
