import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MongoClient, type CommandStartedEvent } from 'mongodb';
import { UsageReports } from '../../store/usage-reports.ts';
import { insertUsage } from '../helpers/console-fixtures.ts';
import { testDatabase } from '../helpers/engines.ts';

// What the console's usage page (and GET /admin/accounts/{id}/usage) asks of the store. An
// account that calls steadily writes a usage record per key and model every few seconds (a
// spend lease settles when 5 s old), some 17,000 a day. With 20,151 records of one account the
// page took 43 to 148 s on the local FerretDB: six aggregations, one per figure, each reading
// every record the account ever had, whatever the days asked for.

describe('usage reports', () => {
  let database: Awaited<ReturnType<typeof testDatabase>>;
  let watcher: MongoClient;
  const reads: CommandStartedEvent[] = [];

  before(async () => {
    database = await testDatabase('usage_reports');
    watcher = new MongoClient(process.env.FRAMEGATE_TEST_MONGODB_URI!, { monitorCommands: true });
    await watcher.connect();
    watcher.on('commandStarted', (event) => {
      const command = event.command as Record<string, unknown>;
      if ((event.commandName === 'find' && command.find === 'usage') || (event.commandName === 'aggregate' && command.aggregate === 'usage')) reads.push(event);
    });
    await insertUsage(database.db, [
      { account_id: 'acct_reads', key_id: 'key_a', day: '2026-03-01', kind: 'chat', requests: 3, input_tokens: 30, output_tokens: 12, spend_micros: 9 },
      { account_id: 'acct_reads', key_id: 'key_a', day: '2026-03-02', kind: 'video', video_seconds: 5, spend_micros: 200_000 },
      { account_id: 'acct_reads', key_id: 'key_b', day: '2026-03-02', kind: 'image', images: 2, spend_micros: 80_000 },
      { account_id: 'acct_reads', key_id: 'key_b', day: '2026-02-28', kind: 'image', images: 1, spend_micros: 40_000 },
      { account_id: 'acct_other', key_id: 'key_c', day: '2026-03-01', kind: 'image', images: 1, spend_micros: 40_000 },
    ]);
  });
  after(async () => {
    await watcher.close();
    await database.drop();
  });

  it('reads the records once for every figure, per key and per day', async () => {
    reads.length = 0;
    const summary = await new UsageReports(watcher.db(database.db.databaseName)).summarise({ accountId: 'acct_reads', fromDay: '2026-03-01', toDay: '2026-03-02' });
    assert.equal(reads.length, 1, `one read of the usage collection, not ${reads.length}`);
    assert.deepEqual(summary.byKey().get('key_a'), { requests: 4, input_tokens: 30, output_tokens: 12, video_seconds: 5, images: 0, spend_micros: 200_009 });
    assert.deepEqual(summary.byKey().get('key_b'), { requests: 1, input_tokens: 0, output_tokens: 0, video_seconds: 0, images: 2, spend_micros: 80_000 });
    assert.deepEqual([...summary.byDay().keys()], ['2026-03-01', '2026-03-02']);
    assert.equal(summary.byDay().get('2026-03-02')?.spend_micros, 280_000);
  });
});
