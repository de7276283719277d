import type { Markers } from './markers.ts';

// The submission-time markers, shared by both video wire formats: each vendor only decides
// how a verdict looks in its own error shape.

export type SubmissionVerdict =
  | { kind: 'accept' }
  | { kind: 'reject'; message: string }
  | { kind: 'unavailable'; message: string; retryAfterSeconds: number };

/** How many attempts of one prompt `[sim:flaky]` refuses before accepting. */
export const flakyRefusals = 2;

export class SubmissionGate {
  // Keyed on the prompt text so a client retrying the same request sees the failures stop,
  // while a test that wants fresh flakiness only has to vary its prompt.
  private readonly attemptsByPrompt = new Map<string, number>();

  judge(prompt: string, markers: Markers): SubmissionVerdict {
    if (markers.reject) {
      return { kind: 'reject', message: 'The request was refused by the simulator ([sim:reject] in the prompt).' };
    }
    if (markers.flaky) {
      const attempt = (this.attemptsByPrompt.get(prompt) ?? 0) + 1;
      this.attemptsByPrompt.set(prompt, attempt);
      if (attempt <= flakyRefusals) {
        return {
          kind: 'unavailable',
          message: `The service is temporarily overloaded ([sim:flaky], attempt ${attempt} of ${flakyRefusals} refused); retry later.`,
          retryAfterSeconds: 1,
        };
      }
    }
    return { kind: 'accept' };
  }
}
