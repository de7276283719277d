/** Waits, when needed, so a burst starts early enough in the UTC minute that it cannot
 * straddle two rate-limit windows (they are whole minutes). */
export async function awayFromMinuteEdge(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 50_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 50));
}
