import type { Collection, Db, Document } from 'mongodb';
import type { UsageRecord } from './usage.ts';

// Read-side of the `usage` collection for the web console: totals per key and per day over a
// range of UTC days. A record may stand for several requests (billing can aggregate), so every
// figure is a $sum of fields, never a count of documents. `day` is a precomputed 'YYYY-MM-DD'
// string because FerretDB's aggregation has no date operators.
//
// FerretDB 1.24 computes only the FIRST accumulator of a $group: `{a: {$sum: '$x'}, b: {$sum:
// '$y'}}` returns the right `a` and `b: 0` (test/console/usage.test.ts caught it). So each
// figure gets its own one-accumulator pipeline, grouped by (day, key) so the same six answers
// serve both the per-day and the per-key view. On MongoDB these are index-backed; on FerretDB
// each scans, which is why these reports are for console pages, never for API hot paths.

export interface UsageTotals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  video_seconds: number;
  images: number;
  spend_micros: number;
}

export interface UsageFilter {
  accountId: string;
  /** Restricts to one key. */
  keyId?: string;
  /** First and last UTC day, inclusive ('YYYY-MM-DD'); omitted means unbounded. */
  fromDay?: string;
  toDay?: string;
}

export const ZERO_USAGE: UsageTotals = { requests: 0, input_tokens: 0, output_tokens: 0, video_seconds: 0, images: 0, spend_micros: 0 };

const SUMMED_FIELDS = Object.keys(ZERO_USAGE) as Array<keyof UsageTotals>;

function matchStage(filter: UsageFilter): Document {
  const match: Document = { account_id: filter.accountId };
  if (filter.keyId) match.key_id = filter.keyId;
  const day: Document = {};
  if (filter.fromDay) day.$gte = filter.fromDay;
  if (filter.toDay) day.$lte = filter.toDay;
  if (Object.keys(day).length > 0) match.day = day;
  return { $match: match };
}

export class UsageReports {
  private readonly collection: Collection<UsageRecord>;

  constructor(db: Db) {
    this.collection = db.collection<UsageRecord>('usage');
  }

  /** Totals per (day, key) cell, from one single-accumulator pipeline per figure. */
  private async cells(filter: UsageFilter): Promise<UsageCell[]> {
    const cells = new Map<string, UsageCell>();
    const sums = await Promise.all(
      SUMMED_FIELDS.map((field) =>
        this.collection.aggregate<{ _id: { day: string; key_id: string }; sum: number | null }>([matchStage(filter), { $group: { _id: { day: '$day', key_id: '$key_id' }, sum: { $sum: `$${field}` } } }]).toArray(),
      ),
    );
    SUMMED_FIELDS.forEach((field, index) => {
      for (const row of sums[index]!) {
        const id = `${row._id.day}|${row._id.key_id}`;
        let cell = cells.get(id);
        if (!cell) {
          cell = { day: row._id.day, keyId: row._id.key_id, totals: { ...ZERO_USAGE } };
          cells.set(id, cell);
        }
        // Records written before a field existed sum to null; a report shows those as 0.
        cell.totals[field] = Number(row.sum ?? 0);
      }
    });
    return [...cells.values()];
  }

  /** One range's usage, ready to be cut per day or per key without asking the store again. */
  async summarise(filter: UsageFilter): Promise<UsageSummary> {
    return new UsageSummary(await this.cells(filter));
  }
}

export interface UsageCell {
  day: string;
  keyId: string;
  totals: UsageTotals;
}

export class UsageSummary {
  constructor(readonly cells: readonly UsageCell[]) {}

  /** Totals per UTC day, in day order, of every key or of one; days without usage are absent. */
  byDay(keyId?: string): Map<string, UsageTotals> {
    return totalsBy(this.cells.filter((cell) => !keyId || cell.keyId === keyId), 'day');
  }

  /** Totals per key id; keys without usage are absent. */
  byKey(): Map<string, UsageTotals> {
    return totalsBy(this.cells, 'keyId');
  }
}

function totalsBy(cells: readonly UsageCell[], dimension: 'day' | 'keyId'): Map<string, UsageTotals> {
  const totals = new Map<string, UsageTotals>();
  for (const cell of cells) totals.set(cell[dimension], addUsage(totals.get(cell[dimension]) ?? ZERO_USAGE, cell.totals));
  return new Map([...totals.entries()].sort(([first], [second]) => (first < second ? -1 : first > second ? 1 : 0)));
}

export function addUsage(first: UsageTotals, second: UsageTotals): UsageTotals {
  return Object.fromEntries(SUMMED_FIELDS.map((field) => [field, first[field] + second[field]])) as unknown as UsageTotals;
}
