import { randomBytes } from 'node:crypto';
import { connectDatabase, type Database } from '../../store/database.ts';

// Test files run under `npm test` (scripts/test.ts), which starts one FerretDB (or uses
// MONGODB_URI) and one Temporal dev server for the whole suite and passes their addresses in.

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run tests through \`npm test\` (optionally \`npm test -- <file>\`).`);
  return value;
}

export function testTemporalAddress(): string {
  return required('FRAMEGATE_TEST_TEMPORAL_ADDRESS');
}

export function temporalTestServerPath(): string {
  return required('FRAMEGATE_TEMPORAL_TEST_SERVER');
}

/** The test store's address (its first host, when the URI names several). */
export function testStoreAddress(): { host: string; port: number } {
  const uri = new URL(required('FRAMEGATE_TEST_MONGODB_URI'));
  return { host: uri.hostname, port: Number(uri.port || 27017) };
}

/** A database of its own for one test file, dropped by the returned cleanup. `via` connects
 * through a loopback port that leads to the test store (a proxy in between), directly. */
export async function testDatabase(label: string, options: { via?: number } = {}): Promise<Database & { drop(): Promise<void> }> {
  const name = `t_${label.replace(/[^a-z0-9]/gi, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const uri = new URL(required('FRAMEGATE_TEST_MONGODB_URI'));
  if (options.via !== undefined) {
    uri.host = `127.0.0.1:${options.via}`;
    uri.searchParams.set('directConnection', 'true');
  }
  const database = await connectDatabase(uri.toString(), name);
  return {
    ...database,
    async drop() {
      await database.db.dropDatabase();
      await database.close();
    },
  };
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}
