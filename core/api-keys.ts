import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

// Key format: "fg_" + 43 base62 characters (32 random bytes) + 6 base62 characters of CRC-32
// over the random part. The checksum lets a secret scanner (or our own auth path) tell a real
// key from a typo or a look-alike without a database lookup.

const KEY_PREFIX = 'fg_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

function toBase62(value: bigint, length: number): string {
  let text = '';
  let rest = value;
  while (rest > 0n) {
    text = BASE62[Number(rest % 62n)] + text;
    rest /= 62n;
  }
  return text.padStart(length, '0');
}

// Every authenticated request checks a checksum: a CRC-32 fits a double exactly, and number
// arithmetic spares the BigInt divisions toBase62 needs for the 190-bit body.
function checksumOf(body: string): string {
  let rest = crc32(body);
  let text = '';
  while (rest > 0) {
    text = BASE62[rest % 62] + text;
    rest = Math.floor(rest / 62);
  }
  return text.padStart(CHECKSUM_LENGTH, '0');
}

export interface GeneratedApiKey {
  plaintext: string;
  hash: string;
  prefix: string;
  last4: string;
}

export function generateApiKey(): GeneratedApiKey {
  const body = toBase62(BigInt(`0x${randomBytes(32).toString('hex')}`), BODY_LENGTH);
  return describeApiKey(`${KEY_PREFIX}${body}${checksumOf(body)}`);
}

/** What is stored of a key: its hash, and the ends shown to tell keys apart. */
export function describeApiKey(plaintext: string): GeneratedApiKey {
  return { plaintext, hash: hashApiKey(plaintext), prefix: plaintext.slice(0, 8), last4: plaintext.slice(-4) };
}

/** True when the text has the key shape and a matching checksum (no database needed). */
export function isWellFormedApiKey(text: string): boolean {
  if (!KEY_PATTERN.test(text)) return false;
  const body = text.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return text.slice(-CHECKSUM_LENGTH) === checksumOf(body);
}

export function hashApiKey(plaintext: string): string {
  // The one-shot hash(): a Hash object per request costs twice as much.
  return hash('sha256', plaintext, 'hex');
}
