import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

// A new key's plaintext must be shown exactly once, and a reload must not create a second key.
// So creation is POST → 303 → GET, and the plaintext rides from the POST to the GET in a
// short-lived cookie that the GET reads and clears at once. It never touches the store (keys
// are stored only as hashes), and the cookie is sealed (AES-256-GCM) under a key derived from
// the session token, which only the browser holds: the sealed value is useless anywhere else,
// even to someone who can read the database. The value carries its own expiry, sealed with it:
// a copy kept past the cookie's two minutes (a browser that ignored Max-Age, a value read off a
// shared machine's disk) shows nothing.

export const CREATED_KEY_COOKIE = 'fg_console_new_key';
const COOKIE_PATH = '/console/keys';
const LIFETIME_SECONDS = 120;

function sealingKey(sessionToken: string): Buffer {
  return createHmac('sha256', sessionToken).update('framegate console: created key').digest();
}

export function sealCreatedKey(sessionToken: string, created: { keyId: string; plaintext: string }, now = Date.now()): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(sessionToken), iv);
  const sealed = Buffer.concat([cipher.update(JSON.stringify({ ...created, expiresAt: now + LIFETIME_SECONDS * 1000 }), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url');
}

export function openCreatedKey(sessionToken: string, cookie: string, now = Date.now()): { keyId: string; plaintext: string } | null {
  try {
    const bytes = Buffer.from(cookie, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', sealingKey(sessionToken), bytes.subarray(0, 12));
    decipher.setAuthTag(bytes.subarray(12, 28));
    const opened = JSON.parse(Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8'));
    if (typeof opened?.keyId !== 'string' || typeof opened?.plaintext !== 'string' || typeof opened?.expiresAt !== 'number' || now > opened.expiresAt) return null;
    return { keyId: opened.keyId, plaintext: opened.plaintext };
  } catch {
    return null;
  }
}

export function setCreatedKeyCookie(reply: FastifyReply, sessionToken: string, created: { keyId: string; plaintext: string }, secure: boolean): void {
  reply.setCookie(CREATED_KEY_COOKIE, sealCreatedKey(sessionToken, created), { path: COOKIE_PATH, httpOnly: true, sameSite: 'strict', secure, maxAge: LIFETIME_SECONDS });
}

/** The created key carried by this request, if any; the cookie is cleared either way. */
export function takeCreatedKey(request: FastifyRequest, reply: FastifyReply, sessionToken: string): { keyId: string; plaintext: string } | null {
  const cookie = request.cookies[CREATED_KEY_COOKIE];
  if (!cookie) return null;
  reply.clearCookie(CREATED_KEY_COOKIE, { path: COOKIE_PATH });
  return openCreatedKey(sessionToken, cookie);
}
