import type { ApiKeyDocument } from '../../../store/api-keys.ts';
import type { UsageTotals } from '../../../store/usage-reports.ts';

// Pages that list an account's keys with their figures (usage, the operator's account page)
// show at most this many: an account may hold thousands (an app that makes a key per user), and
// 1,200 keys made an 845 KB page. Those that spent the most come first; the rest are counted.

export const KEYS_SHOWN = 100;

export interface ShownKeys {
  keys: ApiKeyDocument[];
  /** How many keys of the account are left out. */
  hidden: number;
}

/** All of `keys` when there are at most KEYS_SHOWN, else those that spent the most (then the
 * newest), and `alsoShow` (a key the page is about) whatever it spent. */
export function keysShown(keys: ApiKeyDocument[], usageByKey: Map<string, UsageTotals>, alsoShow?: string | null): ShownKeys {
  if (keys.length <= KEYS_SHOWN) return { keys, hidden: 0 };
  const spend = (key: ApiKeyDocument) => usageByKey.get(key._id)?.spend_micros ?? 0;
  // listForAccount gives the newest first; a stable sort keeps that order among equal spend.
  const ranked = [...keys].sort((a, b) => spend(b) - spend(a));
  const shown = ranked.slice(0, KEYS_SHOWN);
  const extra = alsoShow ? ranked.slice(KEYS_SHOWN).find((key) => key._id === alsoShow) : undefined;
  if (extra) shown.push(extra);
  return { keys: shown, hidden: keys.length - shown.length };
}
