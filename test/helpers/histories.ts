import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { testTemporalAddress } from './engines.ts';

export const HISTORY_FIXTURES = 'test/fixtures/histories';

/** With FRAMEGATE_RECORD_HISTORIES=1, saves a finished workflow's history as a replay fixture,
 * exported by the Temporal CLI in the standard JSON form. Re-record only when a workflow change
 * is meant to be incompatible with running tasks (and say so in the commit). */
export async function recordHistoryIfAsked(workflowId: string, scenario: string): Promise<void> {
  if (process.env.FRAMEGATE_RECORD_HISTORIES !== '1') return;
  const cli = process.env.FRAMEGATE_TEMPORAL_CLI;
  if (!cli) throw new Error('FRAMEGATE_TEMPORAL_CLI is not set: record through `npm test`.');
  const json = execFileSync(cli, ['workflow', 'show', '--workflow-id', workflowId, '--address', testTemporalAddress(), '--output', 'json'], { encoding: 'utf8' });
  writeFileSync(path.join(HISTORY_FIXTURES, `video-task-${scenario}.json`), json);
}
