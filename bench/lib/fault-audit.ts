import type { LedgerOperation } from '../../store/ledger.ts';

// The money-and-tasks audit of `npm run bench:faults`, kept apart from the orchestration so it
// reads as the list of promises it checks. Input: the task ids the caller was given (HTTP 200),
// the account's task snapshots and its ledger entries, read straight from the store.

export interface AuditTask {
  _id: string;
  status: string;
  price_micros: number;
}

export interface AuditEntry {
  seq: number;
  reference: string;
  operation: LedgerOperation;
  amount_micros: number;
  balance_micros: number;
  held_micros: number;
  spent_micros: number;
}

export interface AuditResult {
  accepted: number;
  succeeded: number;
  failed: number;
  /** Accepted tasks that are missing or not final. */
  lost: string[];
  /** Tasks charged more than once, charged although failed, or charged another amount than their price. */
  doubleCharged: string[];
  /** Final tasks whose hold was neither captured nor released (money stuck in `held`). */
  unsettled: string[];
  /** Tasks in the store the caller never got an id for (its submission was refused or timed out). */
  unacknowledged: number;
  /** ...of which were charged: a refused request must not be billed (spec 7, rule 4). */
  unacknowledgedCharged: string[];
  succeededPriceMicros: number;
  videoCapturedMicros: number;
  /** Captures and debits of everything else on the account (chat and image spend leases). */
  otherSpentMicros: number;
  /** The account's totals after its last ledger entry. */
  totals: { balance_micros: number; held_micros: number; spent_micros: number };
  creditedMicros: number;
}

const FINAL = new Set(['succeeded', 'failed']);

export function auditTasksAndLedger(input: { acceptedIds: Iterable<string>; tasks: AuditTask[]; entries: AuditEntry[] }): AuditResult {
  const accepted = new Set(input.acceptedIds);
  const tasks = new Map(input.tasks.map((task) => [task._id, task]));
  const byReference = new Map<string, AuditEntry[]>();
  for (const entry of input.entries) {
    const list = byReference.get(entry.reference) ?? [];
    list.push(entry);
    byReference.set(entry.reference, list);
  }
  const charges = (reference: string) => (byReference.get(reference) ?? []).filter((entry) => entry.operation === 'capture' || entry.operation === 'debit');

  const result: AuditResult = {
    accepted: accepted.size,
    succeeded: 0,
    failed: 0,
    lost: [],
    doubleCharged: [],
    unsettled: [],
    unacknowledged: 0,
    unacknowledgedCharged: [],
    succeededPriceMicros: 0,
    videoCapturedMicros: 0,
    otherSpentMicros: 0,
    totals: { balance_micros: 0, held_micros: 0, spent_micros: 0 },
    creditedMicros: 0,
  };

  for (const id of accepted) {
    const task = tasks.get(id);
    if (!task || !FINAL.has(task.status)) {
      result.lost.push(id);
      continue;
    }
    const charged = charges(id);
    if (task.status === 'succeeded') {
      result.succeeded++;
      result.succeededPriceMicros += task.price_micros;
      if (charged.length !== 1 || charged[0]!.amount_micros !== task.price_micros) result.doubleCharged.push(id);
    } else {
      result.failed++;
      if (charged.length > 0) result.doubleCharged.push(id);
    }
    const entries = byReference.get(id) ?? [];
    const held = entries.some((entry) => entry.operation === 'hold');
    const settled = entries.some((entry) => entry.operation === 'capture' || entry.operation === 'release');
    if (held && !settled) result.unsettled.push(id);
  }

  for (const task of input.tasks) {
    if (accepted.has(task._id)) continue;
    result.unacknowledged++;
    if (charges(task._id).length > 0) result.unacknowledgedCharged.push(task._id);
  }

  for (const entry of input.entries) {
    if (entry.operation === 'credit') result.creditedMicros += entry.amount_micros;
    // Credit an operator took back (admin deductions) is credit no longer given.
    if (entry.operation === 'deduct') result.creditedMicros -= entry.amount_micros;
    if (entry.operation !== 'capture' && entry.operation !== 'debit') continue;
    if (entry.reference.startsWith('task_')) result.videoCapturedMicros += entry.amount_micros;
    else result.otherSpentMicros += entry.amount_micros;
  }
  // A video reference in the ledger without a task document is also an unacknowledged charge.
  for (const [reference, entries] of byReference) {
    if (!reference.startsWith('task_') || tasks.has(reference) || accepted.has(reference)) continue;
    if (entries.some((entry) => entry.operation === 'capture' || entry.operation === 'debit')) result.unacknowledgedCharged.push(reference);
  }

  const last = [...input.entries].sort((a, b) => a.seq - b.seq).at(-1);
  if (last) result.totals = { balance_micros: last.balance_micros, held_micros: last.held_micros, spent_micros: last.spent_micros };
  return result;
}
