// The in-memory video task store. A task keeps only when it started, how long it takes and
// how it will end; its visible state is computed from the clock on every read, so there is
// no timer per task and a test moves a task along simply by moving its injected clock.
// Memory is never reclaimed: the simulator is a dev/test process with a short life.

/** Milliseconds since the epoch; tests inject their own to make time jump. */
export type Clock = () => number;

export interface VideoTask<Details> {
  id: string;
  model: string;
  prompt: string;
  createdAtMs: number;
  durationMs: number;
  /** How long of durationMs the task waits queued (`[sim:queue=N]`); a tenth when unset. */
  queuedMs?: number;
  willFail: boolean;
  cancelledAtMs?: number;
  /** What the vendor's wire format echoes back (ratio, size, seed, ...). */
  details: Details;
}

export type VideoState = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

export interface VideoPhase {
  state: VideoState;
  /** 0 while queued, rising while running, 100 once finished. */
  progress: number;
  /** When the task entered this state, the vendors' `updated_at` / `completed_at`. */
  sinceMs: number;
}

// Vendors report a short queue before work starts; the gateway must see both states.
const queuedShare = 0.1;

export function phaseAt<Details>(task: VideoTask<Details>, nowMs: number): VideoPhase {
  const { createdAtMs, durationMs } = task;
  if (task.cancelledAtMs !== undefined) {
    return { state: 'cancelled', progress: progressAt(task, task.cancelledAtMs), sinceMs: task.cancelledAtMs };
  }
  const elapsedMs = nowMs - createdAtMs;
  if (elapsedMs >= durationMs) {
    return { state: task.willFail ? 'failed' : 'succeeded', progress: 100, sinceMs: createdAtMs + durationMs };
  }
  const runningFromMs = createdAtMs + (task.queuedMs ?? durationMs * queuedShare);
  if (nowMs < runningFromMs) return { state: 'queued', progress: 0, sinceMs: createdAtMs };
  return { state: 'running', progress: progressAt(task, nowMs), sinceMs: runningFromMs };
}

function progressAt<Details>(task: VideoTask<Details>, nowMs: number): number {
  if (task.durationMs <= 0) return 100;
  const share = (nowMs - task.createdAtMs) / task.durationMs;
  // Never 0 once running (that reads as queued) and never 100 before the result exists.
  return Math.min(99, Math.max(1, Math.floor(share * 100)));
}

export function isUnfinished(phase: VideoPhase): boolean {
  return phase.state === 'queued' || phase.state === 'running';
}

export class VideoTaskStore<Details> {
  private readonly tasks = new Map<string, VideoTask<Details>>();

  add(task: VideoTask<Details>): void {
    this.tasks.set(task.id, task);
  }

  find(id: string): VideoTask<Details> | undefined {
    return this.tasks.get(id);
  }

  delete(id: string): boolean {
    return this.tasks.delete(id);
  }

  /** Stops a queued or running task; a finished task is left as it is. Returns the phase after. */
  cancel(task: VideoTask<Details>, nowMs: number): VideoPhase {
    if (isUnfinished(phaseAt(task, nowMs))) task.cancelledAtMs = nowMs;
    return phaseAt(task, nowMs);
  }

  /** True when the clip of this task may be downloaded. */
  hasFinishedClip(id: string, nowMs: number): boolean {
    const task = this.tasks.get(id);
    return task !== undefined && phaseAt(task, nowMs).state === 'succeeded';
  }
}

/** Default length of a simulated generation when the prompt names none. */
export const defaultTaskSeconds = 1;

/** How long a task takes and how long of that it waits queued, from its markers: `queue=N`
 * seconds in the queue, then `delay` seconds of work. */
export function taskTiming(markers: { delaySeconds?: number; queueSeconds?: number }): { durationMs: number; queuedMs?: number } {
  const workMs = Math.round((markers.delaySeconds ?? defaultTaskSeconds) * 1000);
  if (markers.queueSeconds === undefined) return { durationMs: workMs };
  const queuedMs = Math.round(markers.queueSeconds * 1000);
  return { durationMs: queuedMs + workMs, queuedMs };
}
