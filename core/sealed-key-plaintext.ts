import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';

// An API key's plaintext is shown once, in the answer to its creation, and the store keeps only
// its hash. A creation under an Idempotency-Key must still answer a retry with the same
// plaintext: the caller retries because the first answer never reached it. So the plaintext is
// kept for a while sealed (AES-256-GCM) under a key derived from the Idempotency-Key itself,
// which the store never holds: only a caller who knows the Idempotency-Key can open it.
//
// The derivation is scrypt, salted with the account: someone who reads the store and guesses at
// Idempotency-Keys pays a scrypt per guess and account. The record's id comes from the same
// derivation (another part of its output), so it offers no cheaper test of a guess than the seal
// does. A random Idempotency-Key (a UUID) leaves nothing to guess.

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

export function creationSecrets(accountId: string, idempotencyKey: string): Promise<CreationSecrets> {
  return new Promise((resolve, reject) => {
    scrypt(idempotencyKey, `framegate key creation\u0000${accountId}`, 64, COST, (error, derived) => {
      if (error) return reject(error);
      resolve({ recordId: `keycr_${derived.subarray(0, 24).toString('hex')}`, sealKey: derived.subarray(32, 64) });
    });
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

/** The plaintext of a seal made with these secrets; throws when they are not the ones. */
export function openSealedPlaintext(sealed: string, secrets: CreationSecrets): string {
  const bytes = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', secrets.sealKey, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(secrets.recordId));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}
