// Money is integer micro-USD everywhere inside the gateway. USD decimals exist only at the
// edges (admin API input, JSON output), converted here and nowhere else.

export const MICROS_PER_USD = 1_000_000;

/** Converts a USD amount with at most 6 decimals to micro-USD; null when it has more. */
export function usdToMicros(amountUsd: number): number | null {
  if (!Number.isFinite(amountUsd)) return null;
  const micros = Math.round(amountUsd * MICROS_PER_USD);
  if (!Number.isSafeInteger(micros)) return null;
  // A value with more than 6 decimals does not survive the round trip.
  if (Math.abs(micros / MICROS_PER_USD - amountUsd) > 1e-9) return null;
  return micros;
}

export function microsToUsd(micros: number): number {
  return micros / MICROS_PER_USD;
}
