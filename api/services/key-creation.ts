import { generateApiKey } from '../../core/api-keys.ts';
import { GatewayError } from '../../core/errors.ts';
import { creationSecrets, openSealedPlaintext, sealPlaintext, type CreationSecrets } from '../../core/sealed-key-plaintext.ts';
import { keyIdForHash, type ApiKeyDocument, type ApiKeyStore } from '../../store/api-keys.ts';
import { PLAINTEXT_KEPT_MS, type KeyCreationRecord, type KeyCreationStore } from '../../store/key-creations.ts';

// Creating an API key (POST /admin/accounts/{id}/keys). Under an Idempotency-Key, a retry of a
// creation whose answer was lost (a timeout, a dropped connection, a process that died halfway)
// gets the key the first try made, its plaintext included, rather than a second key nobody
// holds the plaintext of. The plaintext can be answered twice only because the creation's
// record keeps it sealed under the Idempotency-Key, for PLAINTEXT_KEPT_MS (store/key-creations.ts).

export interface CreatedKey {
  key: ApiKeyDocument;
  plaintext: string;
  replayed?: true;
}

export class KeyCreation {
  constructor(private readonly stores: { apiKeys: ApiKeyStore; creations: KeyCreationStore }) {}

  /** A new key of the account; under an Idempotency-Key, the one a try under the same key made,
   * `replayed` (422 when it asked for another name or other models; 409 when that key was
   * revoked since, or its plaintext is no longer kept). */
  async create(input: { accountId: string; name: string; models: string[] | null; idempotencyKey?: string }): Promise<CreatedKey> {
    // Each model once, however often the request named it.
    const models = input.models ? [...new Set(input.models)] : null;
    if (input.idempotencyKey === undefined) return this.stores.apiKeys.create({ accountId: input.accountId, name: input.name, models });
    const secrets = await creationSecrets(input.accountId, input.idempotencyKey);
    // A second round only when the record found was forgotten meanwhile (see below).
    for (let round = 0; round < 3; round++) {
      const generated = generateApiKey();
      const now = new Date();
      const record: KeyCreationRecord = {
        _id: secrets.recordId,
        account_id: input.accountId,
        key_id: keyIdForHash(generated.hash),
        name: input.name,
        models,
        sealed_plaintext: sealPlaintext(generated.plaintext, secrets),
        created_at: now,
        sealed_until: new Date(now.getTime() + PLAINTEXT_KEPT_MS),
      };
      const claim = await this.stores.creations.claim(record);
      // The record goes first: a try that dies before the key is made leaves what a retry needs
      // to make that very key.
      if (claim === 'claimed') return this.made(record, generated.plaintext);
      if (claim === null) continue;
      const replayed = await this.replay(claim, { name: input.name, models }, secrets);
      if (replayed) return replayed;
    }
    throw new Error(`could not claim the key creation record ${secrets.recordId}`);
  }

  /** The key of the record, made now if no try made it yet. */
  private made(record: KeyCreationRecord, plaintext: string): Promise<CreatedKey> {
    return this.stores.apiKeys.create({ accountId: record.account_id, name: record.name, models: record.models, plaintext, createdAt: record.created_at });
  }

  /** The key a try under the same Idempotency-Key made (or, when it died before, makes it now);
   * null when that try left nothing to go on (no key, no plaintext): then the record is
   * forgotten, and this creation starts afresh. */
  private async replay(record: KeyCreationRecord, asked: { name: string; models: string[] | null }, secrets: CreationSecrets): Promise<CreatedKey | null> {
    if (!sameKeyAsked(record, asked)) {
      throw new GatewayError('idempotency_mismatch', 'This Idempotency-Key already created a key with another name or other models. Use a new key for a new request.', 'Idempotency-Key');
    }
    const [key, plaintext] = [await this.stores.apiKeys.find(record.key_id), keptPlaintext(record, secrets)];
    if (key?.revoked_at) {
      throw new GatewayError('conflict', `This Idempotency-Key created the key '${record.key_id}', which was revoked since. Create a new key under a new Idempotency-Key.`, 'Idempotency-Key');
    }
    if (plaintext === null) {
      if (!key) {
        await this.stores.creations.forget(record);
        return null;
      }
      throw new GatewayError(
        'conflict',
        `This Idempotency-Key created the key '${record.key_id}' at ${record.created_at.toISOString()}; its plaintext is kept for 24 hours only, so it cannot be shown again. Revoke that key if its plaintext never reached you, and create a new one under a new Idempotency-Key.`,
        'Idempotency-Key',
      );
    }
    return { ...(key ? { key, plaintext } : await this.made(record, plaintext)), replayed: true };
  }
}

/** The same name and the same models, in any order. */
function sameKeyAsked(record: KeyCreationRecord, asked: { name: string; models: string[] | null }): boolean {
  const sorted = (models: string[] | null) => (models === null ? null : JSON.stringify([...models].sort()));
  return record.name === asked.name && sorted(record.models) === sorted(asked.models);
}

/** The record's plaintext while it is kept (the sweeper scrubs it a little after its time). */
function keptPlaintext(record: KeyCreationRecord, secrets: CreationSecrets): string | null {
  if (record.sealed_plaintext === null || record.sealed_until.getTime() <= Date.now()) return null;
  return openSealedPlaintext(record.sealed_plaintext, secrets);
}
