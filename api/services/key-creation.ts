import { generateApiKey } from '../../core/api-keys.ts';
import { GatewayError } from '../../core/errors.ts';
import { creationSecrets, openSealedPlaintext, sealPlaintext, type CreationSecrets } from '../../core/sealed-key-plaintext.ts';
import { keyIdForHash, type ApiKeyDocument, type ApiKeyStore } from '../../store/api-keys.ts';
import { PLAINTEXT_KEPT_MS, type KeyCreationRecord, type KeyCreationStore } from '../../store/key-creations.ts';

// Creating an API key (POST /admin/accounts/{id}/keys). Under an Idempotency-Key, a retry of a
// creation whose answer was lost (a timeout, a dropped connection, a process that died halfway)
// gets the key the first try made, its plaintext included, rather than a second key nobody
// holds the plaintext of. The plaintext can be answered twice only because the creation's
// record keeps it sealed for PLAINTEXT_KEPT_MS (store/key-creations.ts), under a key derived
// from the ADMIN_TOKEN and the Idempotency-Key (core/sealed-key-plaintext.ts).

export interface CreatedKey {
  key: ApiKeyDocument;
  plaintext: string;
  replayed?: true;
}

export class KeyCreation {
  /** `serverSecret`: the ADMIN_TOKEN, which seals and opens the plaintexts kept for retries. */
  constructor(
    private readonly stores: { apiKeys: ApiKeyStore; creations: KeyCreationStore },
    private readonly serverSecret: string,
  ) {}

  /** A new key of the account; under an Idempotency-Key, the one a try under the same key made,
   * `replayed` (422 when it asked for another name or other models; 409 when that key was
   * revoked since, or its plaintext can no longer be shown). */
  async create(input: { accountId: string; name: string; models: string[] | null; idempotencyKey?: string }): Promise<CreatedKey> {
    // Each model once, however often the request named it.
    const models = input.models ? [...new Set(input.models)] : null;
    if (input.idempotencyKey === undefined) return this.stores.apiKeys.create({ accountId: input.accountId, name: input.name, models });
    const secrets = await creationSecrets(input.accountId, input.idempotencyKey, this.serverSecret);
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
    // The record goes first: a try that dies before the key is made leaves what a retry needs
    // to make that very key.
    const claim = await this.stores.creations.claim(record);
    if (claim === 'claimed') {
      const created = await this.made(record, generated.plaintext);
      // A retry made this very key first (from the record), and it was revoked before this
      // insert found it there: no plaintext of a revoked key goes out as a new one.
      if (created.key.revoked_at) throw revokedSince(record);
      return created;
    }
    return this.replay(claim, { name: input.name, models }, secrets);
  }

  /** The key of the record, made now if no try made it yet. */
  private made(record: KeyCreationRecord, plaintext: string): Promise<CreatedKey> {
    return this.stores.apiKeys.create({ accountId: record.account_id, name: record.name, models: record.models, plaintext, createdAt: record.created_at });
  }

  /** The key a try under the same Idempotency-Key made, or, when it died before, makes it now. */
  private async replay(record: KeyCreationRecord, asked: { name: string; models: string[] | null }, secrets: CreationSecrets): Promise<CreatedKey> {
    if (!sameKeyAsked(record, asked)) {
      throw new GatewayError('idempotency_mismatch', 'This Idempotency-Key already created a key with another name or other models. Use a new key for a new request.', 'Idempotency-Key');
    }
    const found = await this.stores.apiKeys.find(record.key_id);
    if (found?.revoked_at) throw revokedSince(record);
    const kept = record.sealed_plaintext !== null && record.sealed_until.getTime() > Date.now();
    if (!kept) {
      // Scrubbed here already, not only by the worker's next sweep.
      if (record.sealed_plaintext !== null) await this.stores.creations.scrub(record._id);
      throw new GatewayError('conflict', found ? `This Idempotency-Key created the key '${record.key_id}' at ${record.created_at.toISOString()}; its plaintext is kept for 24 hours only, so it cannot be shown again. ${REVOKE_AND_RENEW}` : `This Idempotency-Key began a key creation at ${record.created_at.toISOString()} that never finished, and its 24 hours are over. Create the key under a new Idempotency-Key.`, 'Idempotency-Key');
    }
    const plaintext = openSealedPlaintext(record.sealed_plaintext!, secrets);
    if (plaintext === null) {
      const what = found ? `created the key '${record.key_id}'` : 'began a key creation that never finished';
      throw new GatewayError('conflict', `This Idempotency-Key ${what} under another ADMIN_TOKEN, which sealed its plaintext, so it cannot be shown again. ${found ? REVOKE_AND_RENEW : 'Create the key under a new Idempotency-Key.'}`, 'Idempotency-Key');
    }
    const key = found ?? (await this.made(record, plaintext)).key;
    // Revoked while this ran (or a try made the key and it was revoked before this one found it).
    if (key.revoked_at) throw revokedSince(record);
    return { key, plaintext, replayed: true };
  }
}

const REVOKE_AND_RENEW = 'Revoke that key if its plaintext never reached you, and create a new one under a new Idempotency-Key.';

function revokedSince(record: KeyCreationRecord): GatewayError {
  return new GatewayError('conflict', `This Idempotency-Key created the key '${record.key_id}', which was revoked since. Create a new key under a new Idempotency-Key.`, 'Idempotency-Key');
}

/** The same name and the same models, in any order. */
function sameKeyAsked(record: KeyCreationRecord, asked: { name: string; models: string[] | null }): boolean {
  const sorted = (models: string[] | null) => (models === null ? null : JSON.stringify([...models].sort()));
  return record.name === asked.name && sorted(record.models) === sorted(asked.models);
}
