import { MongoClient, type Db } from 'mongodb';
import { releaseHoldsOfAbandonedTasks } from './abandoned-hold-migration.ts';
import { KeyChangeFeed } from './api-key-changes.ts';
import { IdempotencyAnswerPieces } from './idempotency-answer-pieces.ts';
import { IdempotencyTurns } from './idempotency-turns.ts';
import { KeyCreationStore } from './key-creations.ts';
import { Ledger } from './ledger.ts';
import { markEveryLedgerEntry } from './ledger-marker-migration.ts';
import { moveLegacyOverrides } from './rate-limit-overrides.ts';
import { SignInFailureStore } from './sign-in-failures.ts';

// One MongoClient per process. Indexes are created at start-up by whoever connects first;
// createIndex is idempotent, so api and worker may both call it.

export interface Database {
  client: MongoClient;
  db: Db;
  close(): Promise<void>;
}

export async function connectDatabase(uri: string, databaseName: string): Promise<Database> {
  const client = new MongoClient(uri, {
    // Fail fast during an outage so the API can answer 503 instead of hanging. One request can
    // wait on the store up to three times in a row (key lookup, rate-limit block, its own
    // writes) and must still answer well inside a client's timeout (10 s is common).
    serverSelectionTimeoutMS: 2_000,
    // A store that hangs (stopped, frozen) keeps its connections open: an operation in flight
    // waits until the heartbeat finds the server silent, which interrupts it. With the driver's
    // 10 s between heartbeats and this wait at 5 s, the first request after a hang failed only
    // after 17 s; a check every 2 s, given 3 s (it is also the wait for a new connection), fails
    // it within 7 s (test/api/dependency-outage.test.ts). A hello is not a write, so FerretDB's
    // write waits do not make a busy store look hung.
    heartbeatFrequencyMS: 2_000,
    connectTimeoutMS: 3_000,
    // A burst opens connections up to the pool's 100; without this they stayed open idle for
    // good (a soak review: the api held 76 after its load, FerretDB 282 descriptors and 64
    // threads). A connection idle for a minute is closed; the next burst opens what it needs.
    maxIdleTimeMS: 60_000,
    appName: 'framegate',
  });
  try {
    await client.connect();
    const db = client.db(databaseName);
    await ensureIndexes(db);
    await moveLegacyOverrides(db);
    await markEveryLedgerEntry(db);
    await releaseHoldsOfAbandonedTasks(db);
    return { client, db, close: () => client.close() };
  } catch (error) {
    // A caller may try again (core/process-startup.ts): leave no client behind polling.
    await client.close().catch(() => undefined);
    throw error;
  }
}

async function ensureIndexes(db: Db): Promise<void> {
  await db.collection('api_keys').createIndex({ hash: 1 }, { unique: true, name: 'hash_unique' });
  await db.collection('api_keys').createIndex({ account_id: 1, created_at: -1 }, { name: 'by_account' });
  // An account's tasks newest first: the console's lists, and GET /v1/video/generations, which
  // pages by (created_at, _id). (Stores from before also keep the older by_account, its prefix.)
  await db.collection('tasks').createIndex({ account_id: 1, created_at: -1, _id: -1 }, { name: 'by_account_page' });
  await db.collection('tasks').createIndex({ workflow_started: 1, created_at: 1 }, { name: 'by_start_state' });
  // The tasks past TASK_RETENTION_DAYS (store/task-retention.ts), on MongoDB.
  await db.collection('tasks').createIndex({ status: 1, updated_at: 1 }, { name: 'by_status_updated' });
  await Ledger.ensureIndexes(db);
  await KeyChangeFeed.ensureIndexes(db);
  await SignInFailureStore.ensureIndexes(db);
  await KeyCreationStore.ensureIndexes(db);
  await IdempotencyAnswerPieces.ensureIndexes(db);
  await IdempotencyTurns.ensureIndexes(db);
  await db.collection('usage').createIndex({ account_id: 1, day: 1 }, { name: 'by_account_day' });
  await db.collection('usage').createIndex({ key_id: 1, day: 1 }, { name: 'by_key_day' });
  // The operator pages, and the expiry sweep on MongoDB: FerretDB narrows a query by strings and
  // booleans, not by a date range, so it reads every session for the sweep (README,
  // "Development").
  await db.collection('console_credentials').createIndex({ account_id: 1 }, { name: 'by_account' });
  await db.collection('console_sessions').createIndex({ expires_at: 1 }, { name: 'by_expiry' });
}

/** Cheap liveness probe for /readyz. */
export async function pingDatabase(database: Database): Promise<void> {
  await database.db.command({ ping: 1 });
}
