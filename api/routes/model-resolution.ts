import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { requiredAs, withArticle } from '../../core/characters.ts';
import type { Catalog, CatalogModel } from '../../core/catalog.ts';
import { resolveModel } from '../../core/model-access.ts';
import { principalOf } from '../plugins/api-key-auth.ts';

// Request bodies name their model, and the OpenAPI document lists the catalog's ids for each
// endpoint so callers (and the fuzzer) see what exists. An id outside that list is still not a
// 400: spec 7 wants 404 for an unknown model and 403 for one the key may not use, so the model
// is resolved in preValidation, before the body's schema runs.

/** The message for a `model` field that is missing or not one of the catalog's ids. */
export function modelIdRefusal(kind: CatalogModel['kind']) {
  const what = withArticle(`${kind} model id from GET /v1/models`);
  return requiredAs(what, what);
}

/** The `model` field of an endpoint: the catalog's ids of that kind. */
const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

export function modelIdField(catalog: Catalog, kind: CatalogModel['kind']) {
  const ids = catalog
    .all()
    .filter((model) => model.kind === kind)
    .map((model) => model.id);
  if (ids.length === 0) return z.never({ error: `this gateway serves no ${kind} models` });
  return z.enum(ids as [string, ...string[]], { error: modelIdRefusal(kind) }).describe(`${capitalized(withArticle(kind))} model id (GET /v1/models lists those your key may use).`);
}

/** preValidation hook: 404 for an unknown model, 403 for one the key may not use, 400 for a
 * model of another kind; a missing, empty or non-string model is left to the schema (a 400:
 * spec 7's missing required parameter, not an unknown id). */
export function resolveModelFirst(catalog: Catalog, kind: CatalogModel['kind']) {
  return (request: FastifyRequest, _reply: unknown, done: (error?: Error) => void): void => {
    const body = request.body;
    if (typeof body !== 'object' || body === null || !('model' in body)) return done();
    const modelId = (body as { model: unknown }).model;
    try {
      if (typeof modelId === 'string' && modelId !== '') resolveModel(catalog, principalOf(request), modelId, kind);
    } catch (error) {
      return done(error as Error);
    }
    done();
  };
}
