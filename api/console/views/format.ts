import { MICROS_PER_USD } from '../../../core/money.ts';

// How the console writes figures: money from integer micro-USD by integer arithmetic (no float
// ever rounds a cent away), times in UTC (usage days are UTC days too).

const grouped = new Intl.NumberFormat('en-US');

/** 1234567 → "$1.234567", 1500000 → "$1.50", 0 → "$0.00". */
export function formatUsd(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const absolute = Math.abs(micros);
  const dollars = Math.floor(absolute / MICROS_PER_USD);
  const fraction = String(absolute % MICROS_PER_USD).padStart(6, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${sign}$${grouped.format(dollars)}.${fraction}`;
}

export function formatCount(value: number): string {
  return grouped.format(value);
}

/** "2025-03-01 14:05 UTC", or a dash for never. */
export function formatTime(date: Date | null | undefined): string {
  if (!date) return '—';
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** "2025-03-01 14:05:07 UTC": for events seconds apart (webhook attempts 5 s apart read as one
 * minute's), or a dash for never. */
export function formatTimeToSecond(date: Date | null | undefined): string {
  if (!date) return '—';
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How a key is recognised without revealing it: "fg_…AbC1". */
export function maskedKey(key: { last4: string }): string {
  return `fg_…${key.last4}`;
}

/** "whsec_…wxyz": enough to tell secrets apart, nothing to sign with. */
export function maskedSecret(secret: string): string {
  return `whsec_…${secret.slice(-4)}`;
}
