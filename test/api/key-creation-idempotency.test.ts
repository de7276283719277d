import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateApiKey } from '../../core/api-keys.ts';
import { creationSecrets, openSealedPlaintext, sealPlaintext } from '../../core/sealed-key-plaintext.ts';
import { GatewayError } from '../../core/errors.ts';
import { KeyCreation } from '../../api/services/key-creation.ts';
import { ApiKeyStore, keyIdForHash } from '../../store/api-keys.ts';
import { KeyCreationStore, PLAINTEXT_KEPT_MS } from '../../store/key-creations.ts';
import { adminHeaders, bearer, createAccount, startTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.ts';

// POST /admin/accounts/{id}/keys under an Idempotency-Key: a retry gets the key the first try
// made, plaintext included, for 24 hours.

describe('key creation under an Idempotency-Key', () => {
  let harness: TestApp;
  let creations: KeyCreationStore;
  before(async () => {
    harness = await startTestApp('key-creation');
    creations = new KeyCreationStore(harness.database.db);
  });
  after(() => harness.close());

  const create = (accountId: string, payload: object, idempotencyKey?: string) =>
    harness.app.inject({ method: 'POST', url: `/admin/accounts/${accountId}/keys`, headers: { ...adminHeaders, ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }) }, payload });
  const keysNamed = (accountId: string, name: string) => harness.database.db.collection('api_keys').countDocuments({ account_id: accountId, name });
  const authenticates = async (plaintext: string) => (await harness.app.inject({ url: '/v1/models', headers: bearer(plaintext) })).statusCode === 200;
  const refusal = (answer: { statusCode: number; json: () => { error: { code: string; param: string; message: string } } }) => [answer.statusCode, answer.json().error.code, answer.json().error.param];

  it('answers a retry with the key the first try made, plaintext included, and makes no other', async () => {
    const account = await createAccount(harness.app, { name: 'Key retries' });
    const idempotencyKey = `key-${crypto.randomUUID()}`;
    const first = await create(account.id, { name: 'ci', models: ['gpt-4o-mini', 'sora-2'] }, idempotencyKey);
    assert.equal(first.statusCode, 201, first.body);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const retried = await create(account.id, { name: 'ci', models: ['sora-2', 'gpt-4o-mini', 'sora-2'] }, idempotencyKey);
    assert.equal(retried.statusCode, 201, retried.body);
    assert.equal(retried.headers['idempotent-replayed'], 'true');
    assert.equal(retried.headers['cache-control'], 'no-store');
    assert.deepEqual(retried.json(), first.json(), 'the same key, the same plaintext, models in any order');
    assert.equal(await keysNamed(account.id, 'ci'), 1);
    assert.ok(await authenticates(retried.json().key));

    // The store holds no plaintext; the seal opens only with the ADMIN_TOKEN and the Idempotency-Key.
    const [record] = await creations.collection.find({ account_id: account.id }).toArray();
    assert.ok(record && !JSON.stringify(record).includes(first.json().key), 'the plaintext is stored sealed only');
    assert.equal(record.key_id, first.json().id);
    assert.equal(openSealedPlaintext(record.sealed_plaintext!, await creationSecrets(account.id, idempotencyKey, TEST_ADMIN_TOKEN)), first.json().key);
    assert.equal(openSealedPlaintext(record.sealed_plaintext!, await creationSecrets(account.id, idempotencyKey, 'a guess at the admin token')), null);
    assert.equal(openSealedPlaintext(record.sealed_plaintext!, await creationSecrets(account.id, `${idempotencyKey}x`, TEST_ADMIN_TOKEN)), null);

    // The Idempotency-Key is the account's: another account's request under it is its own.
    const other = await createAccount(harness.app, { name: 'Key retries, another account' });
    const elsewhere = await create(other.id, { name: 'ci', models: ['gpt-4o-mini', 'sora-2'] }, idempotencyKey);
    assert.equal(elsewhere.statusCode, 201, elsewhere.body);
    assert.equal(elsewhere.headers['idempotent-replayed'], undefined);
    assert.notEqual(elsewhere.json().id, first.json().id);
  });

  it('refuses another name or other models under the key (422), and makes one key of two requests at once', async () => {
    const account = await createAccount(harness.app, { name: 'Key mismatches' });
    const idempotencyKey = `key-${crypto.randomUUID()}`;
    assert.equal((await create(account.id, { name: 'prod', models: ['sora-2'] }, idempotencyKey)).statusCode, 201);
    for (const changed of [{ name: 'prod2', models: ['sora-2'] }, { name: 'prod', models: ['sora-2', 'gpt-4o-mini'] }, { name: 'prod' }]) {
      assert.deepEqual(refusal(await create(account.id, changed, idempotencyKey)), [422, 'idempotency_mismatch', 'Idempotency-Key'], JSON.stringify(changed));
    }
    assert.equal(await harness.database.db.collection('api_keys').countDocuments({ account_id: account.id }), 1);

    const together = await Promise.all([0, 1].map(() => create(account.id, { name: 'together' }, `${idempotencyKey}-together`)));
    assert.deepEqual(together.map((answer) => answer.statusCode), [201, 201], together.map((answer) => answer.body).join('\n'));
    assert.equal(together[0]!.json().key, together[1]!.json().key);
    assert.deepEqual(together.map((answer) => answer.headers['idempotent-replayed']).sort(), ['true', undefined]);
    assert.equal(await keysNamed(account.id, 'together'), 1);
    assert.ok(await authenticates(together[0]!.json().key));

    // Without a key, each request is a key of its own; a malformed key is a 400.
    const unkeyed = await Promise.all([0, 1].map(() => create(account.id, { name: 'unkeyed' })));
    assert.notEqual(unkeyed[0]!.json().key, unkeyed[1]!.json().key);
    assert.equal(await keysNamed(account.id, 'unkeyed'), 2);
    assert.equal((await create(account.id, { name: 'bad' }, 'tab\there')).statusCode, 400);
  });

  it('makes the key a try that died after its record left, with the plaintext that try sealed', async () => {
    const account = await createAccount(harness.app, { name: 'Key after a crash' });
    const idempotencyKey = `key-${crypto.randomUUID()}`;
    // What a try leaves when its process dies between the record and the key.
    const secrets = await creationSecrets(account.id, idempotencyKey, TEST_ADMIN_TOKEN);
    const generated = generateApiKey();
    const createdAt = new Date(Date.now() - 60_000);
    await creations.claim({ _id: secrets.recordId, account_id: account.id, key_id: keyIdForHash(generated.hash), name: 'resumed', models: null, sealed_plaintext: sealPlaintext(generated.plaintext, secrets), created_at: createdAt, sealed_until: new Date(createdAt.getTime() + PLAINTEXT_KEPT_MS) });
    assert.equal(await authenticates(generated.plaintext), false);

    // Four retries at once, each finding the key still to make: one key, the same for all.
    const retries = await Promise.all([0, 1, 2, 3].map(() => create(account.id, { name: 'resumed' }, idempotencyKey)));
    assert.deepEqual(retries.map((retried) => retried.statusCode), [201, 201, 201, 201], retries.map((retried) => retried.body).join('\n'));
    for (const retried of retries) {
      assert.equal(retried.headers['idempotent-replayed'], 'true');
      assert.deepEqual([retried.json().key, retried.json().id, retried.json().created_at], [generated.plaintext, keyIdForHash(generated.hash), createdAt.toISOString()]);
    }
    assert.equal(await keysNamed(account.id, 'resumed'), 1);
    assert.ok(await authenticates(generated.plaintext));
    // Retries at once rarely meet at the key's insert: the one that comes second gets the key
    // the first inserted, not a duplicate-key error.
    const again = await new ApiKeyStore(harness.database.db).create({ accountId: account.id, name: 'resumed', models: null, plaintext: generated.plaintext, createdAt });
    assert.deepEqual([again.key._id, again.plaintext], [keyIdForHash(generated.hash), generated.plaintext]);

    // One that died more than 24 hours ago left no plaintext to make the key with: a 409, and
    // still no key.
    const deadKey = `${idempotencyKey}-long-dead`;
    const dead = await creationSecrets(account.id, deadKey, TEST_ADMIN_TOKEN);
    const longAgo = new Date(Date.now() - 2 * PLAINTEXT_KEPT_MS);
    await creations.claim({ _id: dead.recordId, account_id: account.id, key_id: 'key_never_made', name: 'unfinished', models: null, sealed_plaintext: null, created_at: longAgo, sealed_until: new Date(longAgo.getTime() + PLAINTEXT_KEPT_MS) });
    const unfinished = await create(account.id, { name: 'unfinished' }, deadKey);
    assert.deepEqual(refusal(unfinished), [409, 'conflict', 'Idempotency-Key']);
    assert.match(unfinished.json().error.message, /never finished/);
    assert.equal(await keysNamed(account.id, 'unfinished'), 0);
  });

  it('tells a retry which key it made once the key is revoked or its plaintext no longer kept (409)', async () => {
    const account = await createAccount(harness.app, { name: 'Key retries too late' });
    const revokedKey = `key-${crypto.randomUUID()}`;
    const revoked = (await create(account.id, { name: 'revoked' }, revokedKey)).json();
    assert.equal((await harness.app.inject({ method: 'DELETE', url: `/admin/keys/${revoked.id}`, headers: adminHeaders })).statusCode, 200);
    const afterRevocation = await create(account.id, { name: 'revoked' }, revokedKey);
    assert.deepEqual(refusal(afterRevocation), [409, 'conflict', 'Idempotency-Key']);
    assert.match(afterRevocation.json().error.message, new RegExp(`'${revoked.id}'.*revoked`));
    assert.ok(!afterRevocation.body.includes(revoked.key));

    // Past its 24 hours, before the sweeper scrubbed it, and after.
    const lateKey = `key-${crypto.randomUUID()}`;
    const late = (await create(account.id, { name: 'late' }, lateKey)).json();
    const { recordId } = await creationSecrets(account.id, lateKey, TEST_ADMIN_TOKEN);
    await creations.collection.updateOne({ _id: recordId }, { $set: { sealed_until: new Date(Date.now() - 1_000) } });
    const overdue = await create(account.id, { name: 'late' }, lateKey);
    assert.deepEqual(refusal(overdue), [409, 'conflict', 'Idempotency-Key']);
    assert.match(overdue.json().error.message, new RegExp(`'${late.id}'.*24 hours`));
    assert.ok(!overdue.body.includes(late.key));
    assert.equal((await creations.collection.findOne({ _id: recordId }))?.sealed_plaintext, null, 'scrubbed by the retry that found it overdue');
    // The sweeper scrubs the others past their time.
    const sweptKey = `key-${crypto.randomUUID()}`;
    assert.equal((await create(account.id, { name: 'swept' }, sweptKey)).statusCode, 201);
    const swept = (await creationSecrets(account.id, sweptKey, TEST_ADMIN_TOKEN)).recordId;
    await creations.collection.updateOne({ _id: swept }, { $set: { sealed_until: new Date(Date.now() - 1_000) } });
    assert.ok((await creations.scrubExpired(new Date())) >= 1);
    assert.equal((await creations.collection.findOne({ _id: swept }))?.sealed_plaintext, null);
    assert.deepEqual(refusal(await create(account.id, { name: 'late' }, lateKey)), [409, 'conflict', 'Idempotency-Key']);
    assert.equal(await keysNamed(account.id, 'late'), 1);
    assert.ok(await authenticates(late.key), 'the key itself still works');
  });

  it('cannot show the plaintext again once the ADMIN_TOKEN changed, and says so (409)', async () => {
    const account = await createAccount(harness.app, { name: 'Key retries after a token change' });
    const idempotencyKey = `key-${crypto.randomUUID()}`;
    const first = (await create(account.id, { name: 'rotated' }, idempotencyKey)).json();
    // An api process started with another ADMIN_TOKEN, over the same store.
    const rotated = new KeyCreation({ apiKeys: new ApiKeyStore(harness.database.db), creations }, 'another admin token, after a rotation');
    await assert.rejects(rotated.create({ accountId: account.id, name: 'rotated', models: null, idempotencyKey }), (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, 'conflict');
      assert.match(error.message, new RegExp(`'${first.id}'.*another ADMIN_TOKEN`));
      return true;
    });
    assert.equal(await keysNamed(account.id, 'rotated'), 1);
  });
});
