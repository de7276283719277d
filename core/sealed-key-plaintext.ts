import { createCipheriv, createDecipheriv, hash, randomBytes, scrypt } from 'node:crypto';

// An API key's plaintext is shown once, in the answer to its creation, and the store keeps only
// its hash. A creation under an Idempotency-Key must still answer a retry with the same
// plaintext: the caller retries because the first answer never reached it. So the plaintext is
// kept for a while sealed (AES-256-GCM) under a key the store never holds, derived from the
// ADMIN_TOKEN (the server's secret, which whoever may create keys holds anyway) and the
// Idempotency-Key. A copy of the store alone opens nothing.
//
// The derivation is scrypt, salted with the account, so a copy of the store is no fast oracle
// for guessing the ADMIN_TOKEN offline either: each guess costs a scrypt. The record's id comes
// from the account and the Idempotency-Key alone, so a retry finds its record after the
// ADMIN_TOKEN changed (and is told its plaintext can no longer be opened).

// 16 MiB and about 50 ms here: an admin route, rarely called, within Node's default maxmem.
const COST = { N: 2 ** 14, r: 8, p: 1 } as const;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface CreationSecrets {
  /** The id of the creation's record: the same for every try under the key and account. */
  recordId: string;
  /** Seals and opens the plaintext; never stored. */
  sealKey: Buffer;
}

export function creationSecrets(accountId: string, idempotencyKey: string, serverSecret: string): Promise<CreationSecrets> {
  const recordId = `keycr_${hash('sha256', `${accountId}\u0000${idempotencyKey}`, 'hex').slice(0, 48)}`;
  return new Promise((resolve, reject) => {
    scrypt(`${serverSecret}\u0000${idempotencyKey}`, `framegate key creation\u0000${accountId}`, 32, COST, (error, sealKey) => (error ? reject(error) : resolve({ recordId, sealKey })));
  });
}

/** The plaintext sealed for the record `recordId` (the record's id is authenticated with it, so
 * a seal copied into another record does not open there): base64 of IV, tag and ciphertext. */
export function sealPlaintext(plaintext: string, secrets: CreationSecrets): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', secrets.sealKey, iv);
  cipher.setAAD(Buffer.from(secrets.recordId));
  const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64');
}

/** The plaintext of a seal made with these secrets; null when they are not the ones (the
 * ADMIN_TOKEN changed since it was sealed). */
export function openSealedPlaintext(sealed: string, secrets: CreationSecrets): string | null {
  const bytes = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', secrets.sealKey, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(secrets.recordId));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}
