/** Milliseconds to wait from a Retry-After header: delay-seconds or an HTTP date (RFC 9110
 * 10.2.3); undefined when absent or unusable. Used for vendors and webhook receivers alike. */
export function parseRetryAfter(header: string | string[] | undefined, now: number = Date.now()): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // Every HTTP-date form starts with a day name; without this check Date.parse would read
  // "-5" or "1.5" as calendar dates.
  if (!/^[A-Za-z]/.test(value)) return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}
