import type { Collection, Db } from 'mongodb';

// Where a worker's sweeps that read a log from a point in time have got to (the terminated runs
// of a task queue: worker/terminated-runs.ts), kept in the store so a restarted worker goes on
// from there and several workers share it. A worker that writes an older point than another
// did only makes the next round look at a few runs twice, which the sweep tolerates.

interface SweeperCursor {
  _id: string;
  since: Date;
}

export class SweeperCursorStore {
  readonly collection: Collection<SweeperCursor>;

  constructor(db: Db) {
    this.collection = db.collection<SweeperCursor>('sweeper_cursors');
  }

  async read(name: string): Promise<Date | null> {
    return (await this.collection.findOne({ _id: name }))?.since ?? null;
  }

  async write(name: string, since: Date): Promise<void> {
    await this.collection.updateOne({ _id: name }, { $set: { since } }, { upsert: true });
  }
}
