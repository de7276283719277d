/**
 * Steering markers: like a payment provider's test card numbers, a marker written in a prompt
 * (or in the last user message of a chat) tells the simulator which path to take, so every
 * outcome the gateway must handle can be produced on demand, offline and deterministically.
 *
 * A marker is `[sim:...]` holding one or more whitespace-separated `name` or `name=value`
 * tokens; several markers may appear in one prompt. Unknown tokens and malformed values are
 * ignored so a typo degrades to the normal path rather than an error.
 *
 * Video submissions (Seedance and OpenAI videos):
 * - `[sim:fail]`      accepted, runs, then ends failed.
 * - `[sim:reject]`    400 at submission.
 * - `[sim:flaky]`     503 with `Retry-After: 1` to the first two submissions of the same
 *                     prompt text, accepted from the third on.
 * - `[sim:down]`      503 with `Retry-After: 1` to every submission.
 * - `[sim:delay=N]`   the task takes N seconds (fractions allowed, 0 = instant; default 1).
 * - `[sim:queue=N]`   the task waits N seconds queued before those (default: a tenth of them).
 * - `[sim:lose_answer]` the first submission of the same prompt text creates its task, then
 *                     the connection is closed without an answer (a create whose answer was
 *                     lost); a retry under the same Idempotency-Key gets that task.
 *
 * Chat and images:
 * - `[sim:error=NNN]`              answer with HTTP status NNN (400-599) in OpenAI's error
 *                                  shape; 429 and 503 carry `Retry-After: 1`.
 * - `[sim:error=NNN error_code=C]` the same, with `code` C (lowercase letters and `_`),
 *                                  e.g. `context_length_exceeded` or `insufficient_quota`.
 * - `[sim:slow]`                   stream with 200 ms between chunks.
 * - `[sim:delay_ms=N]`             wait N ms before the first byte.
 * - `[sim:chunks=N gap_ms=M]`      the reply is exactly N content chunks, M ms apart.
 * - `[sim:break_after=N]`          chat streams: the connection drops after N pieces of the
 *                                  answer, with no finish and no `[DONE]` (0: after the role).
 * - `[sim:image_kib=N]`            images: each PNG carries N KiB more (an ancillary chunk
 *                                  decoders skip), as large as a real high-resolution image.
 */
export interface Markers {
  fail: boolean;
  reject: boolean;
  flaky: boolean;
  down: boolean;
  loseAnswer: boolean;
  slow: boolean;
  delaySeconds?: number;
  queueSeconds?: number;
  errorStatus?: number;
  errorCode?: string;
  delayMs?: number;
  chunks?: number;
  gapMs?: number;
  breakAfter?: number;
  imageKib?: number;
}

const markerPattern = /\[sim:([^\]]*)\]/g;

function nonNegativeNumber(value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const parsed = Number(value);
  return Number.isFinite(parsed) && parsed >= 0 ? parsed : undefined;
}

function nonNegativeInteger(value: string | undefined): number | undefined {
  const parsed = nonNegativeNumber(value);
  return parsed !== undefined && Number.isInteger(parsed) ? parsed : undefined;
}

export function parseMarkers(text: string): Markers {
  const markers: Markers = { fail: false, reject: false, flaky: false, down: false, loseAnswer: false, slow: false };
  for (const match of text.matchAll(markerPattern)) {
    for (const token of (match[1] ?? '').trim().split(/\s+/)) {
      const [name, value] = token.split('=', 2) as [string, string | undefined];
      switch (name) {
        case 'fail':
        case 'reject':
        case 'flaky':
        case 'down':
        case 'slow':
          markers[name] = true;
          break;
        case 'lose_answer':
          markers.loseAnswer = true;
          break;
        case 'delay': {
          const seconds = nonNegativeNumber(value);
          if (seconds !== undefined) markers.delaySeconds = seconds;
          break;
        }
        case 'queue': {
          const seconds = nonNegativeNumber(value);
          if (seconds !== undefined) markers.queueSeconds = seconds;
          break;
        }
        case 'delay_ms': {
          const milliseconds = nonNegativeNumber(value);
          if (milliseconds !== undefined) markers.delayMs = milliseconds;
          break;
        }
        case 'error': {
          const status = nonNegativeInteger(value);
          if (status !== undefined && status >= 400 && status <= 599) markers.errorStatus = status;
          break;
        }
        case 'error_code':
          if (value !== undefined && /^[a-z_]{1,64}$/.test(value)) markers.errorCode = value;
          break;
        case 'chunks': {
          const count = nonNegativeInteger(value);
          if (count !== undefined && count > 0) markers.chunks = count;
          break;
        }
        case 'break_after': {
          const count = nonNegativeInteger(value);
          if (count !== undefined) markers.breakAfter = count;
          break;
        }
        case 'image_kib': {
          // At most 64 MiB an image, so a typo cannot have the simulator allocate gigabytes.
          const kib = nonNegativeInteger(value);
          if (kib !== undefined) markers.imageKib = Math.min(kib, 65_536);
          break;
        }
        case 'gap_ms': {
          const milliseconds = nonNegativeNumber(value);
          if (milliseconds !== undefined) markers.gapMs = milliseconds;
          break;
        }
      }
    }
  }
  return markers;
}

/** The text a user wrote, without the markers, for echoing back in replies. */
export function stripMarkers(text: string): string {
  return text.replace(markerPattern, ' ').replace(/\s+/g, ' ').trim();
}
