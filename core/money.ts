// Money is integer micro-USD everywhere inside the gateway. USD decimals exist only at the
// edges (admin API input, JSON output), converted here and nowhere else.

export const MICROS_PER_USD = 1_000_000;

/** The largest USD amount one admin call may move; far below where micro-USD lose exactness. */
export const MAX_USD_AMOUNT = 1_000_000_000;

/** The most an account may hold, free and held together: $1,000,000,000. Credits past it are
 * refused, so balances stay far below where micro-USD lose exactness (2^53 micros is about
 * $9 billion), spending included. */
export const MAX_ACCOUNT_FUNDS_MICROS = MAX_USD_AMOUNT * MICROS_PER_USD;

/** Converts a USD amount with at most 6 decimals to micro-USD; null when it has more. */
export function usdToMicros(amountUsd: number): number | null {
  if (!Number.isFinite(amountUsd)) return null;
  const micros = Math.round(amountUsd * MICROS_PER_USD);
  if (!Number.isSafeInteger(micros)) return null;
  // A value with more than 6 decimals does not survive the round trip. Exactly: a tolerance
  // would take 1e-12 as 0, which the OpenAPI document's multipleOf 0.000001 calls invalid.
  // (Every decimal with at most 6 places below MAX_USD_AMOUNT round-trips exactly.)
  if (micros / MICROS_PER_USD !== amountUsd) return null;
  return micros;
}

export function microsToUsd(micros: number): number {
  return micros / MICROS_PER_USD;
}

const USD_TEXT = /^(\d{1,12})(?:\.(\d{1,6}))?$/;

/** Parses a typed USD amount ("25", "0.5", "12.345678") into micro-USD without passing through
 * a float; null when it is not a plain amount with at most 6 decimals. */
export function usdTextToMicros(text: string): number | null {
  const match = USD_TEXT.exec(text.trim());
  if (!match) return null;
  const micros = Number(match[1]) * MICROS_PER_USD + Number((match[2] ?? '').padEnd(6, '0'));
  return Number.isSafeInteger(micros) ? micros : null;
}
