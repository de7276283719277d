import { GatewayError } from '../../core/errors.ts';
import { vendorErrors } from '../../core/metrics.ts';
import type { TaskDocument } from '../../store/tasks.ts';
import { VendorRejectedError, VendorTransientError, type ClipRequest, type VendorClip, type VideoVendor } from '../../vendors/types.ts';

// A finished task's clip, for the API's content route and the console's clip link alike: a
// public address to redirect to, or, for vendors whose downloads need the vendor's key, the
// clip itself streamed from the vendor.

export interface ClipSources {
  vendorFor: (upstream: string) => VideoVendor;
  upstreamOf: (modelId: string) => string | undefined;
}

/** A clip streamed through is 200 (whole) or 206 (the range asked for). */
export type Clip = { redirectTo: string } | (VendorClip & { status: 200 | 206 });

const NO_RETRY = { 'x-should-retry': 'false' };

/** Where a caller of the API reads a failed task's error; the console names its own pages. */
const ERROR_IN_API = 'in GET /v1/video/generations/{task_id}';

export async function openClip(task: TaskDocument, sources: ClipSources, ask: ClipRequest = {}, failedTaskErrorAt = ERROR_IN_API): Promise<Clip> {
  // 409: the request is fine, the task is not there (400 would blame the request). A failed
  // task never will be, so its answer does not say to wait; one still running takes minutes.
  // OpenAI's clients retry a 409 at once unless told not to.
  if (task.status === 'failed') throw new GatewayError('conflict', `The task failed, so it has no clip; see its error ${failedTaskErrorAt}.`, 'task_id', NO_RETRY);
  if (task.status !== 'succeeded') {
    throw new GatewayError('conflict', `The task is ${task.status}; its clip is downloadable once it has succeeded.`, 'task_id', NO_RETRY);
  }
  if (task.url) return { redirectTo: task.url };
  const upstream = sources.upstreamOf(task.model);
  const vendor = upstream ? sources.vendorFor(upstream) : undefined;
  if (!vendor?.openContent || !task.vendor_task_id) throw new GatewayError('clip_not_found', 'The clip of this task is no longer available.');
  const clip = await vendor.openContent(task.vendor_task_id, ask).catch((error: unknown) => {
    // The vendor's trouble, not the caller's and not a gateway bug: a 502 the caller may retry.
    // In the gateway's words: the vendor's name its hosts, ports and the operator's account; they
    // go to the log (the error handler logs a 5xx with its `upstream`).
    // A clip the vendor no longer has (404, 410) is never coming back: not a 5xx a client retries.
    if (error instanceof VendorRejectedError && (error.status === 404 || error.status === 410)) {
      throw new GatewayError('clip_not_found', 'The clip of this task is no longer available at the vendor.', 'task_id');
    }
    if (error instanceof VendorTransientError || error instanceof VendorRejectedError) {
      vendorErrors.inc({ vendor: upstream!, kind: error instanceof VendorTransientError ? 'transient' : 'rejected' });
      const what = error.status === undefined ? 'could not be reached' : `answered ${error.status}`;
      // A refusal (the vendor refused the gateway's key, say) stays until the operator acts:
      // no retry of the caller's passes it, and the error handler logs it as an error.
      const failure =
        error instanceof VendorTransientError
          ? new GatewayError('upstream_error', `The vendor ${what} and could not deliver the clip; retry later.`)
          : new GatewayError('upstream_error', `The vendor ${what} and could not deliver the clip; the operator has been told.`, undefined, { 'x-should-retry': 'false' });
      throw Object.assign(failure, { upstream: { status: error.status, message: error.message } });
    }
    throw error;
  });
  if (clip.status === 416) {
    // The vendor's Content-Range (`bytes */<length>`) tells the caller how long the clip is.
    const length: Record<string, string> = clip.contentRange === undefined ? {} : { 'content-range': clip.contentRange };
    throw new GatewayError('range_not_satisfiable', 'The clip has no bytes in the Range asked for; ask for one that starts before its end (Content-Range gives its length).', undefined, length);
  }
  return { ...clip, status: clip.status };
}
