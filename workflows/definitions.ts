import { defineQuery } from '@temporalio/workflow';
import type { TaskStatus } from '../core/video-task.ts';

export interface TaskState {
  status: TaskStatus;
  progress: number;
  vendorTaskId?: string;
}

/** The workflow's own view of its task, readable from the Temporal Web UI or CLI. */
export const getTaskStateQuery = defineQuery<TaskState>('getTaskState');
