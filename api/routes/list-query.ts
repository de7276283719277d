import { z } from 'zod';

// A listing, newest first: its query, `limit` (1 to 100) and `after` (the last id of the page
// before), and its answer, OpenAI's list shape. Shared by the task listing and the admin API's
// account listing.

/** A query value as decimal digits: `z.coerce` alone reads `0x10` as 16 and `1e1` as 10. */
const decimalDigits = (value: unknown) => (typeof value === 'string' && !/^[0-9]+$/.test(value) ? Number.NaN : value);

/** `emptyIsLeftOut`: `?limit=` means the default, as the task listing has always read it (a
 * client building the URL from a missing value); newer listings refuse it. */
export function listLimit(what: string, byDefault: number, options: { emptyIsLeftOut: boolean }) {
  const limit = z.preprocess(
    (value, context) => {
      // `?limit=5&limit=5` arrives as an array: say what is wrong, not that 5 is out of range.
      if (Array.isArray(value)) {
        context.addIssue({ code: 'custom', message: 'must be given once', input: value });
        return z.NEVER;
      }
      return options.emptyIsLeftOut && value === '' ? undefined : decimalDigits(value);
    },
    z.coerce
      .number({ error: 'must be an integer from 1 to 100' })
      .int('must be an integer from 1 to 100')
      .min(1, 'must be from 1 to 100')
      .max(100, 'must be from 1 to 100')
      .default(byDefault),
  );
  if (!options.emptyIsLeftOut) return limit.describe(`How many ${what}, 1 to 100 (default ${byDefault}).`);
  // The document says so too: an integer from 1 to 100, or the empty string (a string's length
  // bound leaves integers alone, and the number bounds leave strings alone). Else what it calls
  // invalid, the route accepted.
  return limit.meta({ type: ['integer', 'string'], maxLength: 0 }).describe(`How many ${what}, 1 to 100 (default ${byDefault}; empty: the default).`);
}

/** Empty (`?after=`) means the first page, as a client building the URL from a missing last_id sends it. */
export function listAfter(description: string) {
  return z
    .preprocess((value) => (value === '' ? undefined : value), z.string({ error: (issue) => (Array.isArray(issue.input) ? 'must be given once' : 'must be the last id of the page before') }).optional())
    .describe(description);
}

/** The answer: `{object: "list", data, first_id, last_id, has_more}`. */
export function listAnswer<Item extends z.ZodType>(item: Item) {
  return z.object({
    object: z.literal('list'),
    data: z.array(item),
    first_id: z.string().nullable(),
    last_id: z.string().nullable().describe('Pass as `after` for the next page.'),
    has_more: z.boolean(),
  });
}

/** One page as the answer: `ids` are the page's items' ids, in its order. */
export function listPage<Item>(data: Item[], ids: string[], hasMore: boolean) {
  return { object: 'list' as const, data, first_id: ids[0] ?? null, last_id: ids.at(-1) ?? null, has_more: hasMore };
}
