import { request } from 'undici';

// Open-loop load for `npm run bench:faults`: calls fire on a fixed schedule whether or not the
// previous ones answered (a caller does not wait for the gateway to recover), each with its own
// deadline. Every answer is filed under the phase in which its call was sent.

export type CallKind = 'POST video' | 'GET task' | 'POST chat' | 'GET readyz';

export interface CallRecord {
  phase: string;
  kind: CallKind;
  /** HTTP status; 0 when no answer came (connection refused or reset). */
  status: number;
  /** No answer within the deadline. */
  hung: boolean;
  /** The body is the spec's error object: {error: {message: string, type: string, ...}}. */
  errorShape: boolean;
  /** error.code of an error body, for the report. */
  code?: string;
  /** error.message of an error body, for the report. */
  message?: string;
  ms: number;
}

export interface CallResult {
  status: number;
  json: unknown;
}

export function hasSpecErrorShape(json: unknown): boolean {
  if (!json || typeof json !== 'object') return false;
  const error = (json as { error?: unknown }).error;
  if (!error || typeof error !== 'object') return false;
  const { message, type } = error as { message?: unknown; type?: unknown };
  return typeof message === 'string' && message.length > 0 && typeof type === 'string' && type.length > 0;
}

export class CallRecorder {
  readonly records: CallRecord[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();
  phase = 'start';

  constructor(
    private readonly origin: string,
    private readonly timeoutMs: number,
  ) {}

  /** Sends one call and files its outcome; resolves with the answer (or null without one). */
  call(kind: CallKind, method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: unknown): Promise<CallResult | null> {
    const phase = this.phase;
    const started = performance.now();
    const signal = AbortSignal.timeout(this.timeoutMs);
    const done = (async (): Promise<CallResult | null> => {
      try {
        const response = await request(`${this.origin}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal,
        });
        const text = await response.body.text();
        let json: unknown = null;
        try {
          json = JSON.parse(text);
        } catch {
          json = null;
        }
        const errorShape = hasSpecErrorShape(json);
        const error = errorShape ? (json as { error: { code?: unknown; message: string } }).error : undefined;
        const code = error ? String(error.code ?? '') : undefined;
        this.records.push({ phase, kind, status: response.statusCode, hung: false, errorShape, ms: performance.now() - started, ...(code ? { code } : {}), ...(error ? { message: error.message } : {}) });
        return { status: response.statusCode, json };
      } catch (error) {
        const hung = signal.aborted;
        this.records.push({ phase, kind, status: 0, hung, errorShape: false, ms: performance.now() - started, code: hung ? 'timeout' : (error as { code?: string }).code ?? 'error' });
        return null;
      }
    })();
    this.inFlight.add(done);
    void done.finally(() => this.inFlight.delete(done));
    return done;
  }

  /** Waits for every call sent so far (each ends by its deadline at the latest). */
  async settle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}

/** Runs `tick` every `intervalMs` until the returned stop function is called. */
export function every(intervalMs: number, tick: () => void): () => void {
  const timer = setInterval(tick, intervalMs);
  return () => clearInterval(timer);
}

interface Row {
  label: string;
  kind: string;
  requests: number;
  ok: number;
  client: number;
  unavailable: number;
  other5xx: number;
  noAnswer: number;
  hung: number;
  maxMs: number;
}

function summarize(records: CallRecord[], label: string, kind: string): Row {
  const row: Row = { label, kind, requests: records.length, ok: 0, client: 0, unavailable: 0, other5xx: 0, noAnswer: 0, hung: 0, maxMs: 0 };
  for (const record of records) {
    row.maxMs = Math.max(row.maxMs, record.ms);
    if (record.hung) row.hung++;
    else if (record.status === 0) row.noAnswer++;
    else if (record.status >= 200 && record.status < 300) row.ok++;
    else if (record.status === 503 && record.errorShape) row.unavailable++;
    else if (record.status >= 500) row.other5xx++;
    else row.client++;
  }
  return row;
}

const KINDS: CallKind[] = ['POST video', 'GET task', 'POST chat'];

/** One block per phase: a row per endpoint and the phase's total; readiness answers beside. */
export function phaseTable(records: CallRecord[], phases: string[]): string {
  const header = ['phase', 'endpoint', 'requests', '2xx', '4xx', '503 spec', 'other 5xx', 'no answer', 'hung', 'max ms', 'readyz'];
  const lines: string[][] = [header];
  for (const phase of phases) {
    const inPhase = records.filter((record) => record.phase === phase);
    const ready = inPhase.filter((record) => record.kind === 'GET readyz');
    const readiness = `${ready.filter((record) => record.status === 200).length} ready / ${ready.filter((record) => record.status === 503).length} unready`;
    const calls = inPhase.filter((record) => record.kind !== 'GET readyz');
    const rows = [...KINDS.map((kind) => summarize(calls.filter((record) => record.kind === kind), phase, kind)), summarize(calls, phase, 'all')];
    rows.forEach((row, index) =>
      lines.push([
        index === 0 ? row.label : '',
        row.kind,
        String(row.requests),
        String(row.ok),
        String(row.client),
        String(row.unavailable),
        String(row.other5xx),
        String(row.noAnswer),
        String(row.hung),
        row.requests ? row.maxMs.toFixed(0) : '-',
        index === 0 ? readiness : '',
      ]),
    );
  }
  const widths = header.map((_, column) => Math.max(...lines.map((line) => line[column]!.length)));
  return lines.map((line) => line.map((cell, column) => (column < 2 || column === 10 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ').trimEnd()).join('\n');
}

export function totals(records: CallRecord[]): Row {
  return summarize(records.filter((record) => record.kind !== 'GET readyz'), 'all', 'all');
}

/** Why calls were refused with 503, per phase: the error messages and how often each came. */
export function unavailableReasons(records: CallRecord[], phases: string[]): string {
  const lines: string[] = [];
  for (const phase of phases) {
    const counts = new Map<string, number>();
    for (const record of records) {
      if (record.phase !== phase || record.kind === 'GET readyz' || record.status !== 503) continue;
      const reason = `${record.kind}: ${record.message ?? '(no message)'}`;
      counts.set(reason, (counts.get(reason) ?? 0) + 1);
    }
    for (const [reason, count] of [...counts].sort((a, b) => b[1] - a[1])) lines.push(`  ${phase.padEnd(18)} ${String(count).padStart(4)} × ${reason}`);
  }
  return lines.join('\n') || '  none';
}
