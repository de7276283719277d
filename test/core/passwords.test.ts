import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HashingBusy, hashPassword, MAX_WAITING_HASHES, verifyPassword } from '../../core/passwords.ts';

describe('console password hashing (scrypt)', () => {
  it('stores the cost parameters and a random salt with each hash, and verifies only the right password', async () => {
    const first = await hashPassword('correct horse battery staple');
    const second = await hashPassword('correct horse battery staple');
    assert.match(first, /^scrypt\$131072\$8\$1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/);
    assert.notEqual(first, second, 'a fresh salt every time');
    assert.equal(await verifyPassword('correct horse battery staple', first), true);
    assert.equal(await verifyPassword('correct horse battery staple', second), true);
    assert.equal(await verifyPassword('correct horse battery stapl', first), false);
    assert.equal(await verifyPassword('', first), false);
  });

  it('treats compatibility forms of a character as the same password (NFKC), and refuses malformed hashes', async () => {
    const hash = await hashPassword('ﬁsh and chips, twelve+');
    assert.equal(await verifyPassword('fish and chips, twelve+', hash), true);
    for (const malformed of ['', 'plain text', hash.replace('scrypt$', 'bcrypt$'), hash.slice(0, -8)]) {
      assert.equal(await verifyPassword('fish and chips, twelve+', malformed), false, malformed);
    }
  });

  it('refuses at once the hashes beyond two running and MAX_WAITING_HASHES waiting', async () => {
    // Cheap parameters (stored in the hash), so 60 verifications take no time: all start in the
    // same tick, two run, MAX_WAITING_HASHES queue and the rest are refused without hashing.
    const { scryptSync } = await import('node:crypto');
    const salt = Buffer.from('fedcba9876543210');
    const stored = `scrypt$16$8$1$${salt.toString('base64')}$${scryptSync('flood', salt, 32, { N: 16, r: 8, p: 1 }).toString('base64')}`;
    const outcomes = await Promise.allSettled(Array.from({ length: 60 }, () => verifyPassword('flood', stored)));
    const verified = outcomes.filter((outcome) => outcome.status === 'fulfilled' && outcome.value === true).length;
    const busy = outcomes.filter((outcome) => outcome.status === 'rejected' && outcome.reason instanceof HashingBusy).length;
    assert.equal(verified, 2 + MAX_WAITING_HASHES);
    assert.equal(busy, 60 - 2 - MAX_WAITING_HASHES);
    // Once the queue has drained, hashing is served again.
    assert.equal(await verifyPassword('flood', stored), true);
  });

  it('honours the parameters stored in an older hash', async () => {
    // A hash made with lower cost (as a future parameter change would leave behind) still verifies.
    const { scryptSync } = await import('node:crypto');
    const salt = Buffer.from('0123456789abcdef');
    const key = scryptSync('old password here', salt, 32, { N: 2 ** 14, r: 8, p: 1 });
    const stored = `scrypt$16384$8$1$${salt.toString('base64')}$${key.toString('base64')}`;
    assert.equal(await verifyPassword('old password here', stored), true);
    assert.equal(await verifyPassword('new password here', stored), false);
  });
});
