import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { createJsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
// Imported, not read at run time, so the built api (scripts/lib/build-api.ts) carries it along.
import packageJson from '../../package.json' with { type: 'json' };
import { withResponseLinks } from './links.ts';
import { withResponseHeaders } from './response-headers.ts';
import { securitySchemes } from './security.ts';

// The OpenAPI 3.1 document, generated from the routes' zod schemas (the same schemas that
// validate requests and serialize answers), served at /openapi.json, with Swagger UI at /docs
// (its assets are served from the package, nothing is fetched from a CDN).
// 3.1 rather than 3.0: its schemas are JSON Schema 2020-12, which can state rules 3.0 cannot
// (how many entries of one kind an array may hold), so the document can be as strict as the
// validation behind it. Only the public API is documented: the console's HTML pages, the docs
// themselves and anything else not listed below stay out.

const PUBLIC_ROUTE = /^\/(?:v1|admin)\/|^\/(?:healthz|readyz|metrics)$/;

const { version } = packageJson;

export interface OpenApiOptions {
  /** Where callers reach the API; the document's only server. */
  publicBaseUrl: string;
}

async function openApiPlugin(app: FastifyInstance, options: OpenApiOptions): Promise<void> {
  const zodTransform = createJsonSchemaTransform({});
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Framegate',
        version,
        description:
          'An API gateway for generative media: asynchronous video tasks, OpenAI-compatible chat completions and images, one key with a balance for all of them. Every error is `{"error": {"message", "type", "code", "param"?}}`.',
      },
      servers: [{ url: options.publicBaseUrl }],
      components: { securitySchemes },
      tags: [
        { name: 'video', description: 'Asynchronous video generation tasks' },
        { name: 'chat', description: 'OpenAI-compatible chat completions' },
        { name: 'images', description: 'OpenAI-compatible image generation' },
        { name: 'models', description: 'The models a key may use' },
        { name: 'admin', description: 'Accounts, credits and keys (operator token)' },
        { name: 'operations', description: 'Probes and metrics' },
      ],
    },
    transform: (document) => (PUBLIC_ROUTE.test(document.url) ? zodTransform(document) : { schema: { hide: true }, url: document.url }),
    transformObject: (document) => withResponseHeaders(withResponseLinks(jsonSchemaTransformObject(document))),
  });
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { deepLinking: true } });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}

export const openApiDocument = fp(openApiPlugin, { name: 'openapi-document' });
