import { CancellationScope, isCancellation, setCurrentDetails, sleep } from '@temporalio/workflow';

// A vendor submission that an operator's cancel cannot cut loose. Cancelled the plain way, the
// workflow stops waiting at once while the activity goes on at the worker: the vendor makes the
// job, and the workflow, which never heard its id, cannot cancel it, so the vendor generates a
// clip nobody gets at the operator's expense. Here the call runs shielded from the cancel; the
// cancel then stops the call's retries and waits for the attempt under way, whose job comes
// back to be cancelled.

/** `submit`'s result; on a cancel meanwhile, `onCancelled` gets the job the call made (undefined
 * when it made none, or failed) and the cancellation is thrown. `submit` must schedule its
 * activity with the WAIT_CANCELLATION_COMPLETED cancellation type: cancelled during a retry's
 * backoff it ends at once, and an attempt under way runs to its end (at most its start-to-close
 * timeout), its result reported, with no retry after it. */
export function submitWaitingThroughCancel<T>(submit: () => Promise<T>, onCancelled: (made: T | undefined) => void): Promise<T> {
  return shieldedFromCancel(submit, onCancelled, async (submitted, attempts) => {
    setCurrentDetails('Cancelled: waiting for the vendor call under way to end, to cancel the job it made');
    attempts.cancel();
    return submitted.then((value) => value, () => undefined);
  });
}

/** Longer than one attempt may take (its start-to-close timeout is 60 s). */
const ATTEMPT_SETTLES_MS = 70_000;

/** The first version (patch cancel-during-submission), kept as it ran for the histories that
 * took it: with the plain cancellation type, it waited up to ATTEMPT_SETTLES_MS for the call to
 * end before stopping its retries, and a retry started meanwhile could still make a job unseen. */
export function submitThroughCancel<T>(submit: () => Promise<T>, onCancelled: (made: T | undefined) => void): Promise<T> {
  return shieldedFromCancel(submit, onCancelled, async (submitted, attempts) => {
    const settled = await Promise.race([submitted.then((value) => ({ value }), () => undefined), sleep(ATTEMPT_SETTLES_MS).then(() => undefined)]);
    if (!settled) attempts.cancel();
    return settled?.value;
  });
}

/** Runs `submit` in a scope of its own that the workflow's cancel does not reach (`attempts`,
 * which only `afterCancel` cancels); on that cancel, `afterCancel` (run shielded) settles what the
 * call made. Cancelled already (during the hold): no vendor call at all. */
async function shieldedFromCancel<T>(
  submit: () => Promise<T>,
  onCancelled: (made: T | undefined) => void,
  afterCancel: (submitted: Promise<T>, attempts: CancellationScope) => Promise<T | undefined>,
): Promise<T> {
  const workflowScope = CancellationScope.current();
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
    onCancelled(await CancellationScope.nonCancellable(() => afterCancel(submitted, attempts)));
    throw error;
  }
}
