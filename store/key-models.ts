import type { Collection, Db } from 'mongodb';
import { upsertOnceMore } from './duplicate-keys.ts';

// The models a key may use, as changed after it was created: a document of its own per key in
// api_key_models (_id the key's), which wins over the `models` the key was created with. Not a
// write to the key document: that one is inserted and then only ever revoked (store/api-keys.ts).
// FerretDB applies an update as a read-modify-write of the whole document without isolation, so
// a change of models written while the key was being revoked could write it back live.

export interface KeyModelsDocument {
  _id: string;
  /** Model ids the key may use; null means every model. */
  models: string[] | null;
  changed_at: Date;
}

export function keyModels(db: Db): Collection<KeyModelsDocument> {
  return db.collection<KeyModelsDocument>('api_key_models');
}

/** Replaces the key's models (each once). */
export async function setKeyModels(collection: Collection<KeyModelsDocument>, keyId: string, models: string[] | null): Promise<void> {
  const stored = models ? [...new Set(models)] : null;
  await upsertOnceMore(() => collection.updateOne({ _id: keyId }, { $set: { models: stored, changed_at: new Date() } }, { upsert: true }));
}

/** The changed models of several keys in one query, by id (absent: as created). */
export async function readKeyModelsOf(collection: Collection<KeyModelsDocument>, ids: string[]): Promise<Map<string, string[] | null>> {
  if (ids.length === 0) return new Map();
  const found = await collection.find({ _id: { $in: ids } }).toArray();
  return new Map(found.map((document) => [document._id, document.models]));
}
