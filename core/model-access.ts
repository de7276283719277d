import type { Catalog, CatalogModel } from './catalog.ts';
import { quotedId as quoted, withArticle } from './characters.ts';
import { GatewayError } from './errors.ts';

export interface ModelAccess {
  models: string[] | null;
}

export function mayUseModel(access: ModelAccess, modelId: string): boolean {
  return access.models === null || access.models.includes(modelId);
}

/** The model a request names, if the key may use it, in the spec's order: unknown id → 404,
 * not permitted → 403. */
export function findUsableModel(catalog: Catalog, access: ModelAccess, modelId: string): CatalogModel {
  const model = catalog.find(modelId);
  if (!model) {
    throw new GatewayError('model_not_found', `The model ${quoted(modelId)} does not exist. GET /v1/models lists the models your key can use.`, 'model');
  }
  if (!mayUseModel(access, modelId)) {
    throw new GatewayError('model_not_allowed', `This API key may not use the model ${quoted(modelId)}.`, 'model');
  }
  return model;
}

/** findUsableModel, and then a model of another kind than this endpoint's → 400. */
export function resolveModel<Kind extends CatalogModel['kind']>(
  catalog: Catalog,
  access: ModelAccess,
  modelId: string,
  kind: Kind,
): Extract<CatalogModel, { kind: Kind }> {
  const model = findUsableModel(catalog, access, modelId);
  if (model.kind !== kind) {
    throw new GatewayError('invalid_request', `The model ${quoted(modelId)} is ${withArticle(model.kind)} model; this endpoint needs ${withArticle(kind)} model.`, 'model');
  }
  return model as Extract<CatalogModel, { kind: Kind }>;
}
