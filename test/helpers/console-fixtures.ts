import type { Db } from 'mongodb';
import type { VideoTaskWorkflowInput } from '../../core/video-task.ts';
import type { TaskDocument } from '../../store/tasks.ts';
import type { UsageRecord } from '../../store/usage.ts';

// Rows the console reads, written straight into the real store, for page tests that need
// exact figures and states without waiting for real work to produce them.

let sequence = 0;

export function taskDocument(overrides: Partial<TaskDocument> & Pick<TaskDocument, 'account_id' | 'key_id'>): TaskDocument {
  const now = new Date();
  sequence += 1;
  return {
    _id: `task_fixture${String(sequence).padStart(4, '0')}`,
    model: 'seedance-2.0',
    status: 'succeeded',
    seconds: 5,
    resolution: '720p',
    ratio: '16:9',
    metadata: {},
    price_micros: 400_000,
    progress: 100,
    url: 'https://cdn.example/clip.mp4',
    request_id: 'req_fixture',
    workflow_started: true,
    workflow_input: {} as VideoTaskWorkflowInput,
    created_at: now,
    updated_at: now,
    ...overrides,
  };
}

export async function insertUsage(db: Db, records: Array<Partial<UsageRecord> & Pick<UsageRecord, 'account_id' | 'key_id' | 'day' | 'kind'>>): Promise<void> {
  await db.collection<UsageRecord>('usage').insertMany(
    records.map((record) => {
      sequence += 1;
      return {
        _id: `usage_fixture_${sequence}`,
        model: record.kind === 'video' ? 'seedance-2.0' : record.kind === 'chat' ? 'gpt-4o-mini' : 'gpt-image-1',
        requests: 1,
        video_seconds: 0,
        input_tokens: 0,
        output_tokens: 0,
        images: 0,
        spend_micros: 0,
        created_at: new Date(`${record.day}T12:00:00Z`),
        ...record,
      };
    }),
  );
}
