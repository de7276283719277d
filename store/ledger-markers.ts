import type { Collection, Db } from 'mongodb';
import { isDuplicateKey } from './duplicate-keys.ts';
import type { LedgerEntry, LedgerOperation } from './ledger.ts';

// A marker (`ledger_ops`, keyed by an entry's op_id) finds an applied operation by _id, the one
// lookup FerretDB answers without scanning. It is written right after its entry, so a crash
// can leave an entry unmarked; a writer therefore marks the head it builds on before appending
// (ensureMarked), and only an account's head can lack its marker (store/ledger.ts).

interface OpMarker {
  _id: string;
  entry_id: string;
  operation: LedgerOperation;
}

const MARKED_ACCOUNTS_KEPT = 10_000;

export class LedgerMarkers {
  private readonly markers: Collection<OpMarker>;
  /** Per account, the last head this process knows is marked. */
  private readonly markedHeads = new Map<string, { seq: number; opId: string }>();

  constructor(
    db: Db,
    private readonly entries: Collection<LedgerEntry>,
  ) {
    this.markers = db.collection<OpMarker>('ledger_ops');
  }

  find(opId: string): Promise<OpMarker | null> {
    return this.markers.findOne({ _id: opId });
  }

  /** The marked entry of the operation, or null. */
  async entryOf(opId: string): Promise<LedgerEntry | null> {
    const marker = await this.find(opId);
    return marker ? this.entries.findOne({ _id: marker.entry_id }) : null;
  }

  /** Marks the head before an entry goes on it, unless this process knows it marked. */
  async ensureMarked(head: LedgerEntry): Promise<void> {
    // By seq and op: a chain replaced underneath (a restored backup) does not pass for this one.
    const known = this.markedHeads.get(head.account_id);
    if (known?.seq === head.seq && known.opId === head.op_id) return;
    if (!(await this.find(head.op_id))) await this.insert(head);
    this.note(head);
  }

  /** Marks an entry just written (or found without its marker). */
  async mark(entry: LedgerEntry): Promise<void> {
    await this.insert(entry);
    this.note(entry);
  }

  private async insert(entry: LedgerEntry): Promise<void> {
    await this.markers.insertOne({ _id: entry.op_id, entry_id: entry._id, operation: entry.operation }).catch((error: unknown) => {
      if (!isDuplicateKey(error)) throw error;
    });
  }

  private note(entry: LedgerEntry): void {
    const known = this.markedHeads.get(entry.account_id);
    if (known && known.seq > entry.seq) return;
    // Bounded: forgetting an account costs its next movement one marker read.
    if (this.markedHeads.size >= MARKED_ACCOUNTS_KEPT) this.markedHeads.clear();
    this.markedHeads.set(entry.account_id, { seq: entry.seq, opId: entry.op_id });
  }
}
