import { createHash, timingSafeEqual } from 'node:crypto';

// Operator secrets (ADMIN_TOKEN, METRICS_TOKEN) are compared in constant time. Hashing first
// gives both sides the same length, so timingSafeEqual never throws and the comparison time
// does not depend on how long the guess was.

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

export function secretMatches(candidate: string, secret: string): boolean {
  return timingSafeEqual(digest(candidate), digest(secret));
}

/** Whether an `Authorization` header is `Bearer <secret>`. */
export function bearerMatches(header: string | undefined, secret: string): boolean {
  const token = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1];
  return token !== undefined && secretMatches(token, secret);
}
