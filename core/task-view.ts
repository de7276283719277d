import type { TaskDocument } from '../store/tasks.ts';

// The one rendering of a task: GET /v1/video/generations/{id} returns it and the webhook POSTs
// it, so both are byte-for-byte the same JSON for the same snapshot.

export function taskView(task: TaskDocument, publicBaseUrl: string) {
  const view: Record<string, unknown> = {
    task_id: task._id,
    object: 'video.generation',
    status: task.status,
  };
  if (task.status === 'succeeded') {
    view.url = task.content_via_gateway ? `${publicBaseUrl}/v1/video/generations/${task._id}/content` : task.url;
  }
  Object.assign(view, {
    format: 'mp4',
    model: task.model,
    seconds: String(task.seconds),
    progress: task.progress,
    metadata: { ...task.metadata, ratio: task.ratio, resolution: task.resolution },
  });
  if (task.error) view.error = task.error;
  view.created_at = Math.floor(task.created_at.getTime() / 1000);
  view.updated_at = Math.floor(task.updated_at.getTime() / 1000);
  return view;
}

export function taskViewJson(task: TaskDocument, publicBaseUrl: string): string {
  return JSON.stringify(taskView(task, publicBaseUrl));
}
