import type { Binary, Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// The answer an Idempotency-Key record keeps for replay, when it is too long for the record: a
// document may not pass 16 MiB (MongoDB and FerretDB alike), and an image call's base64 answer
// reaches tens of MiB (the gateway takes up to 128 MiB from a provider). Such an answer is kept
// as its UTF-8 bytes in pieces of PIECE_BYTES, one document each, written before the record is
// marked completed, so a record never names pieces that are not all there. Pieces are named
// after the record and the claim that wrote them, so a retry that took the record over writes
// its own. Each piece is written and read on its own: FerretDB 1.24 answers a `$in` over _id
// by scanning, and does not cut a reply at 16 MiB.

/** UTF-8 bytes an answer may have and still be kept inside its record; longer ones go in
 * pieces this long. */
export const PIECE_BYTES = 8 * 1024 * 1024;

/** Pieces outlive their record by this much, so a sweeper whose clock runs ahead of the api's
 * does not delete the pieces of a record still replayed. */
const PIECE_MARGIN_MS = 60 * 60 * 1_000;

interface AnswerPiece {
  /** `${recordId}:${claim time}:${index}` */
  _id: string;
  data: Buffer | Binary;
  expires_at: Date;
}

export class IdempotencyAnswerPieces {
  readonly collection: Collection<AnswerPiece>;

  constructor(db: Db) {
    this.collection = db.collection<AnswerPiece>('idempotency_answer_pieces');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('idempotency_answer_pieces').createIndex({ expires_at: 1 }, { name: 'by_expiry' });
  }

  /** Whether the answer needs pieces. */
  static needed(body: string): boolean {
    // Bytes are at most three a character: only an answer near the size is measured.
    return body.length * 3 > PIECE_BYTES && Buffer.byteLength(body, 'utf8') > PIECE_BYTES;
  }

  /** Keeps the answer in pieces, until `recordExpiresAt` and a margin; how many. A write
   * retried after a failure finds the pieces it wrote before and leaves them. */
  async keep(recordId: string, claimedAt: Date, body: string, recordExpiresAt: Date): Promise<number> {
    const bytes = Buffer.from(body, 'utf8');
    const count = Math.ceil(bytes.length / PIECE_BYTES);
    const expiresAt = new Date(recordExpiresAt.getTime() + PIECE_MARGIN_MS);
    for (let index = 0; index < count; index++) {
      const piece = { _id: pieceId(recordId, claimedAt, index), data: bytes.subarray(index * PIECE_BYTES, (index + 1) * PIECE_BYTES), expires_at: expiresAt };
      await this.collection.insertOne(piece).catch((error: unknown) => {
        if (!isDuplicateKey(error)) throw error;
      });
    }
    return count;
  }

  /** The answer kept in `count` pieces by the claim at `claimedAt`. */
  async read(recordId: string, claimedAt: Date, count: number): Promise<string> {
    const parts: Buffer[] = [];
    for (let index = 0; index < count; index++) {
      const id = pieceId(recordId, claimedAt, index);
      const piece = await this.collection.findOne({ _id: id });
      if (!piece) throw new Error(`the Idempotency-Key answer piece ${id} is missing`);
      parts.push(Buffer.isBuffer(piece.data) ? piece.data : Buffer.from(piece.data.buffer));
    }
    return Buffer.concat(parts).toString('utf8');
  }

  async deleteExpired(now: Date): Promise<number> {
    return (await this.collection.deleteMany({ expires_at: { $lt: now } })).deletedCount;
  }
}

const pieceId = (recordId: string, claimedAt: Date, index: number) => `${recordId}:${claimedAt.getTime()}:${index}`;
