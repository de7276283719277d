import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { testTemporalAddress } from './engines.ts';

export const HISTORY_FIXTURES = 'test/fixtures/histories';

/** With FRAMEGATE_RECORD_HISTORIES=1, saves a finished workflow's history (its latest run) as a
 * replay fixture, exported by the Temporal CLI in the standard JSON form, named
 * `<scenario>.<day>.json` (FRAMEGATE_RECORD_HISTORIES_TAG instead of the day). Fixtures are added
 * beside the older ones, never written over: an older history is what proves that tasks started
 * by an older worker still replay, down every branch a patch keeps for them. */
export async function recordHistoryIfAsked(workflowId: string, scenario: string): Promise<void> {
  if (process.env.FRAMEGATE_RECORD_HISTORIES !== '1') return;
  const cli = process.env.FRAMEGATE_TEMPORAL_CLI;
  if (!cli) throw new Error('FRAMEGATE_TEMPORAL_CLI is not set: record through `npm test`.');
  const tag = process.env.FRAMEGATE_RECORD_HISTORIES_TAG ?? new Date().toISOString().slice(0, 10);
  // The whole history: the task can be final while its workflow still delivers the webhook.
  const describe = () => JSON.parse(execFileSync(cli, ['workflow', 'describe', '--workflow-id', workflowId, '--address', testTemporalAddress(), '--output', 'json'], { encoding: 'utf8' })) as { workflowExecutionInfo?: { status?: string } };
  for (const started = Date.now(); ; await new Promise((resolve) => setTimeout(resolve, 200))) {
    const status = describe().workflowExecutionInfo?.status;
    if (status !== 'WORKFLOW_EXECUTION_STATUS_RUNNING') break;
    if (Date.now() - started > 30_000) throw new Error(`${workflowId} still runs after 30 s: record a finished workflow`);
  }
  const json = execFileSync(cli, ['workflow', 'show', '--workflow-id', workflowId, '--address', testTemporalAddress(), '--output', 'json'], { encoding: 'utf8' });
  writeFixture(path.join(HISTORY_FIXTURES, `${scenario}.${tag}.json`), json);
}

/** recordHistoryIfAsked for a workflow of the time-skipping test server, which the CLI does not
 * reach: its history is fetched through the client and written in the same JSON form. */
export async function recordFetchedHistoryIfAsked(client: Client, workflowId: string, scenario: string): Promise<void> {
  if (process.env.FRAMEGATE_RECORD_HISTORIES !== '1') return;
  const tag = process.env.FRAMEGATE_RECORD_HISTORIES_TAG ?? new Date().toISOString().slice(0, 10);
  const handle = client.workflow.getHandle(workflowId);
  await handle.result();
  writeFixture(path.join(HISTORY_FIXTURES, `${scenario}.${tag}.json`), historyToJSON(await handle.fetchHistory()));
}

function writeFixture(file: string, json: string): void {
  try {
    writeFileSync(file, json, { flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new Error(`${file} exists: fixtures are never written over; set FRAMEGATE_RECORD_HISTORIES_TAG to record another set`);
    throw error;
  }
}

/** The patch ids a history's markers carry (the ids `patched()` recorded when it ran). */
export function patchesIn(history: { events?: Array<{ eventType?: string; markerRecordedEventAttributes?: { markerName?: string; details?: Record<string, { payloads?: Array<{ data?: string }> }> } }> }): string[] {
  const ids: string[] = [];
  for (const event of history.events ?? []) {
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') continue;
    const data = marker.details?.['patch-data']?.payloads?.[0]?.data;
    if (data) ids.push((JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { id: string }).id);
  }
  return ids;
}
