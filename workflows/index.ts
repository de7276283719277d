// The worker bundles this file: every workflow the video task queue runs is exported here.
export { videoTaskWorkflow } from './video-task.ts';
export { closeTerminatedTaskWorkflow } from './close-terminated-task.ts';
