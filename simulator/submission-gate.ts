import type { FastifyReply, FastifyRequest } from 'fastify';
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
  private readonly answersLost = new Set<string>();

  judge(prompt: string, markers: Markers): SubmissionVerdict {
    if (markers.reject) {
      return { kind: 'reject', message: 'The request was refused by the simulator ([sim:reject] in the prompt).' };
    }
    if (markers.down) {
      return { kind: 'unavailable', message: 'The service is down ([sim:down] in the prompt); retry later.', retryAfterSeconds: 1 };
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

  /** Whether the answer to this created task is to be lost (`[sim:lose_answer]`, first time only). */
  losesAnswer(prompt: string, markers: Markers): boolean {
    if (!markers.loseAnswer || this.answersLost.has(prompt)) return false;
    this.answersLost.add(prompt);
    return true;
  }
}

/** Task ids by the Idempotency-Key that created them, one map per wire format: a create
 * repeated under a key already seen answers with that task and creates nothing, as APIs that
 * honour the header do (Stripe's, for one). Keys are kept for the simulator's lifetime. */
export class CreatedUnderKey {
  private readonly taskIds = new Map<string, string>();

  taskIdFor(key: string | undefined): string | undefined {
    return key === undefined ? undefined : this.taskIds.get(key);
  }

  remember(key: string | undefined, taskId: string): void {
    if (key !== undefined) this.taskIds.set(key, taskId);
  }
}

/** The request's Idempotency-Key, if it sent one. */
export function idempotencyKeyOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['idempotency-key'];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** Closes the connection without an answer: to the client, the create's answer was lost. */
export function loseTheAnswer(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.hijack();
  request.raw.socket.destroy();
  return reply;
}
