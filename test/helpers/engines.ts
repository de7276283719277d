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

/** A database of its own for one test file, dropped by the returned cleanup. */
export async function testDatabase(label: string): Promise<Database & { drop(): Promise<void> }> {
  const name = `t_${label.replace(/[^a-z0-9]/gi, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const database = await connectDatabase(required('FRAMEGATE_TEST_MONGODB_URI'), name);
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
