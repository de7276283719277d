import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';

// The answer an Idempotency-Key record keeps for replay, when it is too long for the record: a
// document may not pass 16 MiB (MongoDB and FerretDB alike), and an image call's base64 answer
// reaches tens of MiB (the gateway takes up to 128 MiB from a provider). Such an answer is kept
// in pieces of PIECE_CHARS, one document each, written before the record is marked completed,
// so a record never names pieces that are not all there. Pieces are named after the record and
// the claim that wrote them, so a retry that took the record over writes its own.

/** Characters an answer may have and still be kept inside its record; longer ones go in
 * pieces this long. The answers are JSON: mostly base64, one byte a character. */
export const PIECE_CHARS = 8 * 1024 * 1024;

interface AnswerPiece {
  /** `${recordId}:${claim time}:${index}` */
  _id: string;
  data: string;
  expires_at: Date;
}

export class IdempotencyAnswerPieces {
  readonly collection: Collection<AnswerPiece>;

  constructor(db: Db) {
    this.collection = db.collection<AnswerPiece>('idempotency_answer_pieces');
  }

  /** Keeps the answer in pieces; how many. A write retried after a failure finds the pieces it
   * wrote before and leaves them. */
  async keep(recordId: string, claimedAt: Date, body: string, expiresAt: Date): Promise<number> {
    const count = Math.ceil(body.length / PIECE_CHARS);
    for (let index = 0; index < count; index++) {
      const piece = { _id: pieceId(recordId, claimedAt, index), data: body.slice(index * PIECE_CHARS, (index + 1) * PIECE_CHARS), expires_at: expiresAt };
      await this.collection.insertOne(piece).catch((error: unknown) => {
        if (!isDuplicateKey(error)) throw error;
      });
    }
    return count;
  }

  /** The answer kept in `count` pieces by the claim at `claimedAt`. */
  async read(recordId: string, claimedAt: Date, count: number): Promise<string> {
    const ids = Array.from({ length: count }, (_, index) => pieceId(recordId, claimedAt, index));
    const found = new Map((await this.collection.find({ _id: { $in: ids } }).toArray()).map((piece) => [piece._id, piece.data]));
    return ids
      .map((id) => {
        const data = found.get(id);
        if (data === undefined) throw new Error(`the Idempotency-Key answer piece ${id} is missing`);
        return data;
      })
      .join('');
  }

  async deleteExpired(now: Date): Promise<number> {
    return (await this.collection.deleteMany({ expires_at: { $lt: now } })).deletedCount;
  }
}

const pieceId = (recordId: string, claimedAt: Date, index: number) => `${recordId}:${claimedAt.getTime()}:${index}`;
