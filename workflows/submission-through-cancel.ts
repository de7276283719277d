import { CancellationScope, isCancellation, sleep } from '@temporalio/workflow';

// A vendor submission that an operator's cancel cannot cut loose. Cancelled the plain way, the
// workflow stops waiting at once while the activity goes on at the worker: the vendor makes the
// job, and the workflow, which never heard its id, cannot cancel it, so the vendor generates a
// clip nobody gets at the operator's expense. Here the call runs shielded from the cancel; a
// cancel waits (a bounded while) for the attempt under way to bring back the job it made, then
// stops any further retries and goes on as a cancellation.

/** Longer than one attempt may take (its start-to-close timeout is 60 s). */
const ATTEMPT_SETTLES_MS = 70_000;

/** `submit`'s result; on a cancel meanwhile, `onCancelled` gets the job the call made (undefined
 * when it made none in time, or failed) and the cancellation is thrown. */
export async function submitThroughCancel<T>(submit: () => Promise<T>, onCancelled: (made: T | undefined) => void): Promise<T> {
  const workflowScope = CancellationScope.current();
  // Cancelled already (during the hold): no vendor call at all.
  if (workflowScope.consideredCancelled) return submit();
  let attempts!: CancellationScope;
  const submitted = CancellationScope.nonCancellable(() => {
    attempts = new CancellationScope({ cancellable: true });
    return attempts.run(submit);
  });
  try {
    return await Promise.race([submitted, workflowScope.cancelRequested]);
  } catch (error) {
    if (!isCancellation(error)) throw error;
    const made = await CancellationScope.nonCancellable(async () => {
      const settled = await Promise.race([submitted.then((value) => ({ value }), () => undefined), sleep(ATTEMPT_SETTLES_MS).then(() => undefined)]);
      if (!settled) attempts.cancel();
      return settled?.value;
    });
    onCancelled(made);
    throw error;
  }
}
