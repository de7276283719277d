/** Waits for `work`, or until `deadline` (epoch ms), whichever comes first. */
export async function untilDeadline(work: Promise<unknown>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))));
  await Promise.race([work, timeUp]);
  clearTimeout(timer);
}
