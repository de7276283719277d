import type { CommandStartedEvent, Db } from 'mongodb';
import { MongoClient } from 'mongodb';
import type { Database } from '../../store/database.ts';
import type { testDatabase } from './engines.ts';

// A second client on a test database that keeps every find, update and delete it sends: tests
// that what the code under test asks of the store is addressed by _id (the one address every
// collection has an index for, on MongoDB and on the patched FerretDB alike).

export interface WatchedDatabase extends Database {
  db: Db;
  /** Every find sent through this client, oldest first. */
  finds: CommandStartedEvent[];
  /** Every update and delete sent through this client, oldest first. */
  writes: CommandStartedEvent[];
  /** The finds whose filter names a field other than _id. */
  scans(): CommandStartedEvent[];
}

export async function watchedDatabase(shared: Awaited<ReturnType<typeof testDatabase>>): Promise<WatchedDatabase> {
  const client = new MongoClient(process.env.FRAMEGATE_TEST_MONGODB_URI!, { monitorCommands: true });
  await client.connect();
  const finds: CommandStartedEvent[] = [];
  const writes: CommandStartedEvent[] = [];
  client.on('commandStarted', (event) => {
    if (event.commandName === 'find') finds.push(event);
    if (event.commandName === 'update' || event.commandName === 'delete') writes.push(event);
  });
  return {
    client,
    db: client.db(shared.db.databaseName),
    close: () => client.close(),
    finds,
    writes,
    scans: () =>
      finds.filter((event) => {
        const filter = (event.command as { filter?: Record<string, unknown> }).filter ?? {};
        return Object.keys(filter).some((field) => field !== '_id');
      }),
  };
}
