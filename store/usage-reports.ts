import type { Collection, Db, Document } from 'mongodb';
import type { UsageRecord } from './usage.ts';

// Read-side of the `usage` collection for the web console: totals per key and per day over a
// range of UTC days. A record may stand for several requests (billing can aggregate), so every
// figure is a $sum of fields, never a count of documents. `day` is a precomputed 'YYYY-MM-DD'
// string because FerretDB's aggregation has no date operators.
//
// One read of the store per report (test/store/usage-reports.test.ts). On MongoDB that is one
// $group with a $sum per figure, computed by the store. FerretDB 1.24 computes only the FIRST
// accumulator of a $group: `{a: {$sum: '$x'}, b: {$sum: '$y'}}` returns the right `a` and
// `b: 0` (test/console/usage.test.ts caught it). Six one-accumulator pipelines, one per figure,
// each read every record of the account there (it narrows by the account, not by a range of
// days): 20,151 records made the usage page take 43 to 148 s. So on FerretDB the records are
// read once, only the fields summed, and summed here per (day, key) cell.

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
  private groupsWhole?: Promise<boolean>;

  constructor(private readonly db: Db) {
    this.collection = db.collection<UsageRecord>('usage');
  }

  /** Whether the store computes every accumulator of a $group: not FerretDB, which names itself
   * in buildInfo. Asked once; a store that will not say is read the way that works on both. */
  private computesWholeGroups(): Promise<boolean> {
    this.groupsWhole ??= this.db.admin().command({ buildInfo: 1 }).then(
      (info) => typeof info.ferretdbVersion !== 'string',
      () => false,
    );
    return this.groupsWhole;
  }

  /** Totals per (day, key) cell, from one read of the store. */
  private async cells(filter: UsageFilter): Promise<UsageCell[]> {
    return (await this.computesWholeGroups()) ? this.cellsGrouped(filter) : this.cellsSummedHere(filter);
  }

  private async cellsGrouped(filter: UsageFilter): Promise<UsageCell[]> {
    const sums: Document = {};
    for (const field of SUMMED_FIELDS) sums[field] = { $sum: `$${field}` };
    const rows = await this.collection.aggregate<{ _id: { day: string; key_id: string } } & Record<keyof UsageTotals, number | null>>([matchStage(filter), { $group: { _id: { day: '$day', key_id: '$key_id' }, ...sums } }]).toArray();
    return rows.map((row) => {
      const totals = { ...ZERO_USAGE };
      // Records written before a field existed sum to null; a report shows those as 0.
      for (const field of SUMMED_FIELDS) totals[field] = Number(row[field] ?? 0);
      return { day: row._id.day, keyId: row._id.key_id, totals };
    });
  }

  private async cellsSummedHere(filter: UsageFilter): Promise<UsageCell[]> {
    const cells = new Map<string, UsageCell>();
    const projection: Document = { _id: 0, day: 1, key_id: 1 };
    for (const field of SUMMED_FIELDS) projection[field] = 1;
    const records = this.collection.find<Pick<UsageRecord, 'day' | 'key_id'> & Partial<Record<keyof UsageTotals, unknown>>>(matchStage(filter).$match, { projection, batchSize: 10_000 });
    for await (const record of records) {
      const id = `${record.day}|${record.key_id}`;
      let cell = cells.get(id);
      if (!cell) {
        cell = { day: record.day, keyId: record.key_id, totals: { ...ZERO_USAGE } };
        cells.set(id, cell);
      }
      for (const field of SUMMED_FIELDS) {
        // Records written before a field existed lack it; a report counts those as 0.
        const value = record[field];
        if (typeof value === 'number' && Number.isFinite(value)) cell.totals[field] += value;
      }
    }
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
