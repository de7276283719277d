import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import type { UsageTotals } from '../../../store/usage-reports.ts';

// Pages that list an account's keys with their figures (usage, the operator's account page)
// show at most this many: an account may hold thousands (an app that makes a key per user), and
// 1,200 keys made an 845 KB page. Those that spent the most come first; the rest are counted,
// and the operator's page pages through them.

export const KEYS_SHOWN = 100;

export interface ShownKeys {
  keys: ApiKeyDocument[];
  /** How many keys of the account are left out. */
  hidden: number;
  /** Which run of KEYS_SHOWN keys, by spend, is shown (from 1), and how many runs there are. */
  page: number;
  pages: number;
}

/** All of `keys` when there are at most KEYS_SHOWN, else the `page`-th run of KEYS_SHOWN of
 * them by spend (the most first, then the newest; a page past the last is the last), and
 * `alsoShow` (a key the page is about) whatever it spent. */
export function keysShown(keys: ApiKeyDocument[], usageByKey: Map<string, UsageTotals>, options: { alsoShow?: string | null; page?: number } = {}): ShownKeys {
  if (keys.length <= KEYS_SHOWN) return { keys, hidden: 0, page: 1, pages: 1 };
  const spend = (key: ApiKeyDocument) => usageByKey.get(key._id)?.spend_micros ?? 0;
  // listForAccount gives the newest first; a stable sort keeps that order among equal spend.
  const ranked = [...keys].sort((a, b) => spend(b) - spend(a));
  const pages = Math.ceil(ranked.length / KEYS_SHOWN);
  const page = Math.min(Math.max(1, Math.trunc(options.page ?? 1) || 1), pages);
  const shown = ranked.slice((page - 1) * KEYS_SHOWN, page * KEYS_SHOWN);
  const extra = options.alsoShow && !shown.some((key) => key._id === options.alsoShow) ? ranked.find((key) => key._id === options.alsoShow) : undefined;
  if (extra) shown.push(extra);
  return { keys: shown, hidden: keys.length - shown.length, page, pages };
}
