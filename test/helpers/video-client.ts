import { request } from 'undici';

export interface TaskJson {
  task_id: string;
  status: string;
  url?: string;
  error?: { code: string; message: string; vendor_code?: string };
  progress: number;
  metadata: Record<string, unknown>;
  [field: string]: unknown;
}

/** Talks to a running api over real HTTP, the way a caller would. */
export function videoClient(baseUrl: string, key: string) {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  return {
    async submit(body: Record<string, unknown>): Promise<{ status: number; json: Record<string, any> }> {
      const response = await request(`${baseUrl}/v1/video/generations`, { method: 'POST', headers, body: JSON.stringify(body) });
      return { status: response.statusCode, json: (await response.body.json()) as Record<string, any> };
    },
    async getRaw(taskId: string): Promise<{ status: number; text: string }> {
      const response = await request(`${baseUrl}/v1/video/generations/${taskId}`, { headers });
      return { status: response.statusCode, text: await response.body.text() };
    },
    async get(taskId: string): Promise<TaskJson> {
      const { status, text } = await this.getRaw(taskId);
      if (status !== 200) throw new Error(`GET task ${taskId}: ${status} ${text}`);
      return JSON.parse(text) as TaskJson;
    },
    /** Polls until the task is final; records every status seen on the way. */
    async waitForFinal(taskId: string, timeoutMs = 60_000): Promise<TaskJson & { seen: string[] }> {
      const seen: string[] = [];
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const task = await this.get(taskId);
        if (seen.at(-1) !== task.status) seen.push(task.status);
        if (task.status === 'succeeded' || task.status === 'failed') return { ...task, seen };
        if (Date.now() > deadline) throw new Error(`task ${taskId} still ${task.status} after ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
  };
}
