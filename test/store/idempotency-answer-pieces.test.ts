import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IdempotencyAnswerPieces, PIECE_BYTES } from '../../store/idempotency-answer-pieces.ts';
import { IdempotencyStore } from '../../store/idempotency.ts';
import { testDatabase } from '../helpers/engines.ts';

// An Idempotency-Key answer too long for its record, kept in pieces beside it
// (test/api/idempotency.test.ts replays one through the gateway).

describe('Idempotency-Key answers kept in pieces', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  before(async () => {
    database = await testDatabase('answer_pieces');
  });
  after(() => database.drop());

  it('gives back an answer cut inside a character byte for byte, and keeps a short one in its record', async () => {
    const store = new IdempotencyStore(database.db);
    // The emoji's four bytes straddle the first cut; the accents make every later byte count differ from the characters.
    const body = `${'a'.repeat(PIECE_BYTES - 2)}😀${'é'.repeat(1_000)}`;
    assert.ok(body.length < PIECE_BYTES + 1_100 && Buffer.byteLength(body) > PIECE_BYTES);
    const claimedAt = new Date();
    const claim = await store.claim({ id: 'key_pieces:cut', fingerprint: 'f', taskId: 'task_x', now: claimedAt });
    assert.equal(claim.kind, 'claimed');
    const { record } = claim as Extract<typeof claim, { kind: 'claimed' }>;
    await store.complete(record._id, claimedAt, { statusCode: 200, contentType: 'application/json', body });
    const completed = await store.collection.findOne({ _id: record._id });
    assert.deepEqual([completed?.body, completed?.body_pieces], [undefined, 2]);
    assert.ok((await store.answerOf(completed!)) === body, 'the same answer, byte for byte');

    assert.equal(IdempotencyAnswerPieces.needed('é'.repeat(PIECE_BYTES / 2)), false, 'exactly the most bytes a record keeps');
    assert.equal(IdempotencyAnswerPieces.needed(`${'é'.repeat(PIECE_BYTES / 2)}a`), true);
    const short = (await store.claim({ id: 'key_pieces:short', fingerprint: 'f', taskId: 'task_y', now: claimedAt })) as Extract<Awaited<ReturnType<IdempotencyStore['claim']>>, { kind: 'claimed' }>;
    await store.complete(short.record._id, claimedAt, { statusCode: 200, contentType: 'application/json', body: '{"ok":true}' });
    const kept = await store.collection.findOne({ _id: short.record._id });
    assert.deepEqual([kept?.body, kept?.body_pieces], ['{"ok":true}', undefined]);

    // Pieces outlive their record a little (a sweeper's clock ahead of the api's), then go.
    await store.deleteExpired(new Date(Date.now() + 24 * 3_600_000 + 60_000));
    assert.equal(await store.collection.countDocuments({ _id: record._id }), 0);
    assert.equal(await store.pieces.collection.countDocuments(), 2, 'kept past the record for the margin');
    await store.deleteExpired(new Date(Date.now() + 26 * 3_600_000));
    assert.equal(await store.pieces.collection.countDocuments(), 0);
  });
});
