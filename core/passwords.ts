import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

// Console passwords are hashed with scrypt, a memory-hard KDF built into Node (no native
// dependency). The parameters are OWASP's recommendation (N = 2^17, r = 8, p = 1: 128 MiB and
// about half a second per hash here) and are stored inside each hash, so they can be raised
// later without invalidating passwords hashed before.
//
// Format: scrypt$<N>$<r>$<p>$<salt base64>$<key base64>

const COST = { N: 2 ** 17, r: 8, p: 1 } as const;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
// Node refuses scrypt above 32 MiB unless told; 128 * N * r bytes is what the cost needs.
const memoryFor = (N: number, r: number) => 128 * N * r + 16 * 1024 * 1024;

// Each hash holds 128 MiB for half a second: a burst of sign-ins must queue instead of asking
// the process for gigabytes at once. The queue is bounded too: a flood of sign-in posts (their
// CSRF token is free) would otherwise keep real sign-ins waiting for minutes. Past it, a hash
// is refused at once with HashingBusy, which the console answers with 503 and Retry-After.
const MAX_CONCURRENT_HASHES = 2;
export const MAX_WAITING_HASHES = 16;
let running = 0;
const waiting: Array<() => void> = [];

/** Too many passwords are being hashed already; try again shortly. */
export class HashingBusy extends Error {
  constructor() {
    super('too many passwords are being hashed right now');
  }
}

async function withHashSlot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT_HASHES && waiting.length >= MAX_WAITING_HASHES) throw new HashingBusy();
  if (running >= MAX_CONCURRENT_HASHES) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

function derive(password: string, salt: Buffer, cost: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...cost, maxmem: memoryFor(cost.N, cost.r) };
  return withHashSlot(
    () =>
      new Promise((resolve, reject) => {
        scrypt(password.normalize('NFKC'), salt, KEY_BYTES, options, (error, key) => (error ? reject(error) : resolve(key)));
      }),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, COST);
  return ['scrypt', COST.N, COST.r, COST.p, salt.toString('base64'), key.toString('base64')].join('$');
}

const STORED = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$/;

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const match = STORED.exec(stored);
  if (!match) return false;
  const [, N, r, p, salt, key] = match;
  const expected = Buffer.from(key!, 'base64');
  const actual = await derive(password, Buffer.from(salt!, 'base64'), { N: Number(N), r: Number(r), p: Number(p) });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

// Signing in with an unknown email still costs one hash, so the answer time does not tell an
// attacker which emails have an account.
let decoyHash: Promise<string> | undefined;
export async function spendDecoyVerification(password: string): Promise<void> {
  decoyHash ??= hashPassword(randomBytes(16).toString('hex'));
  await verifyPassword(password, await decoyHash);
}
