/** A one-time signal between a test and the code it holds (a vendor stand-in that waits):
 * `reached` resolves once `fire()` was called. */
export function signal(): { reached: Promise<void>; fire: () => void } {
  let fire!: () => void;
  const reached = new Promise<void>((resolve) => (fire = resolve));
  return { reached, fire };
}
